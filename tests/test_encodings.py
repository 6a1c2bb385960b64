"""Text in a legacy encoding is refused with its likely name and the conversion command, and read
as it is with ``encoding:`` (issue 34: a GBK corpus had 78% of its characters replaced, exit 0)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from encoderlab.data.corpus import Corpus, CorpusConfig
from encoderlab.errors import DataError

ZH = ["这款手机的电池非常耐用，屏幕清晰，价格也很合理。", "物流很快，包装完好，客服态度好，推荐购买！",
      "质量一般，用了两天就坏了，不推荐。"] * 20
FR = "Le café était très bon, mais le service était lent. Élève, garçon, déjà vu.\n"


def _docs(path, **kw) -> list[str]:
    return list(Corpus(CorpusConfig(paths=(str(path),), doc_split="line", **kw)))


def test_a_gbk_corpus_is_refused_naming_the_encoding_and_the_command_and_read_with_encoding(tmp_path):
    f = tmp_path / "reviews.txt"
    f.write_bytes("\n".join(ZH).encode("gbk"))
    with pytest.raises(DataError) as e:
        _docs(f)
    msg = str(e.value)
    assert msg.startswith(f"{f}: not utf-8 text:") and "the limit is 1%" in msg
    assert "GB18030 (GBK, GB2312)" in msg  # the detector's guess, named as a person would
    assert f"iconv -f GB18030 -t UTF-8 {f} > {tmp_path / 'reviews.utf8.txt'}" in msg
    assert "--encoding gb18030" in msg
    assert _docs(f, encoding="gb18030") == ZH  # the option reads it exactly


def test_the_threshold_is_one_percent_of_the_characters_and_at_least_16_bytes(tmp_path):
    stray = tmp_path / "stray.txt"
    stray.write_bytes(b"caf\xe9 \xff\xfe ok\n")  # 3 bad bytes in a short file: replaced and counted
    assert _docs(stray) == ["caf\ufffd \ufffd\ufffd ok"]
    few = tmp_path / "few.txt"  # 20 invalid bytes in ~2,300 characters (0.9%): under the limit
    few.write_bytes(("plain ascii words " * 128 + "\n").encode() + FR.encode("latin-1") * 2)
    assert len(_docs(few)) == 3
    many = tmp_path / "many.txt"  # 40 in ~1,200 (3%): a Latin-1 file
    many.write_bytes(("plain ascii words " * 64 + "\n").encode() + FR.encode("latin-1") * 4)
    with pytest.raises(DataError, match="single-byte Western code page .*iconv -f CP1252 -t UTF-8"):
        _docs(many)
    assert len(_docs(many, max_invalid_share=1.0)) == 5  # the old behaviour on request


def test_a_utf16_file_is_named_from_its_byte_order_mark_not_skipped_as_binary(tmp_path):
    f = tmp_path / "u16.txt"
    f.write_bytes("\n".join(ZH[:3]).encode("utf-16"))
    with pytest.raises(DataError, match=r"UTF-16 text, not utf-8: it looks like UTF-16 text \(its byte-order mark\)"):
        _docs(f)
    assert _docs(f, encoding="utf-16") == ZH[:3]


def test_cli_refuses_a_gbk_corpus_in_one_line_and_prints_no_blank_lines_on_a_good_one(tmp_path):
    bad, good = tmp_path / "gbk.txt", tmp_path / "utf8.txt"
    bad.write_bytes("\n".join(ZH).encode("gbk"))
    good.write_text("\n\n".join(ZH), encoding="utf-8")
    cmd = [sys.executable, "-m", "encoderlab", "tokenizer", "train", "--vocab-size", "60", "--out", str(tmp_path / "t")]
    r = subprocess.run([*cmd, "--corpus", str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"encoderlab tokenizer: error: {bad}: not utf-8 text") and "GB18030" in r.stderr
    assert not (tmp_path / "t").exists()  # nothing written
    r = subprocess.run([*cmd, "--corpus", str(good)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("corpus: ")  # the progress bars' blank lines are gone
    assert "" not in r.stdout.splitlines()


def test_a_gbk_task_file_is_refused_with_the_hint_and_read_with_the_specs_encoding(tmp_path):
    from encoderlab.eval.tasks import TaskDataError, TaskSpec, load_task

    rows = ["text,label"] + [f"{t},{'pos' if i % 2 else 'neg'}" for i, t in enumerate(ZH)]
    for name in ("train.csv", "dev.csv"):
        (tmp_path / name).write_bytes("\n".join(rows).encode("gbk"))
    spec = TaskSpec(name="r", format="csv", text_a="text", label="label", train="train.csv",
                    eval_files={"dev": "dev.csv"})
    with pytest.raises(TaskDataError) as e:
        load_task(spec, tmp_path)
    msg = str(e.value)
    assert msg.startswith(f"{tmp_path / 'train.csv'}:2: not UTF-8 text (byte 0xd5 at column 1)")
    assert "iconv -f GB18030 -t UTF-8" in msg and "encoding: gb18030 in the task spec" in msg
    data = load_task(spec.replace(encoding="gb18030"), tmp_path)
    assert [e.text_a for e in data.train] == ZH and data.labels == ("neg", "pos")
