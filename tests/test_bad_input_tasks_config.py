"""Property tests: task readers, task specs, minimal pairs, prompt templates, recipes, studies and
``key=value`` overrides on bad input (docs/reliability.md).

Properties: nothing but the project's own error escapes; every error names its file, with the line
(data files) or the key (configs); a task file with one bad line is refused at exactly that line.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
import yaml
from eval_helpers import write_vocab
from hypothesis import given
from hypothesis import strategies as st

from encoderlab.config import ConfigError
from encoderlab.data.tokenizer import load_tokenizer
from encoderlab.errors import EncoderlabError
from encoderlab.eval.intrinsic import read_minimal_pairs
from encoderlab.eval.prompting import build_prompts
from encoderlab.eval.tasks import Example, TaskDataError, TaskSpec, get_task, load_task
from encoderlab.study.config import StudyConfig
from encoderlab.train.config import PretrainConfig

SPEC = TaskSpec(name="t", text_a="s", label="y", labels=("neg", "pos"), eval_files={"dev": "dev.tsv"})
GOOD_ROWS = [f"sentence number {i}\t{'pos' if i % 2 else 'neg'}" for i in range(12)]


def _task_dir(d: Path, train: bytes) -> Path:
    (d / "train.tsv").write_bytes(train)
    (d / "dev.tsv").write_bytes(("s\ty\n" + "\n".join(GOOD_ROWS) + "\n").encode())
    return d


@given(data=st.binary(max_size=600), fmt=st.sampled_from(["tsv", "csv", "jsonl"]))
def test_any_bytes_as_a_task_file_load_or_raise_our_error_naming_file_and_line(data, fmt):
    spec = SPEC.replace(format=fmt, train=f"train.{fmt}", eval_files={"dev": f"train.{fmt}"})
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / f"train.{fmt}").write_bytes(data)
        try:
            task = load_task(spec, d)
        except TaskDataError as e:
            # a bad row at its line, or a file with no example at all (empty, header only) by its name
            assert re.search(re.escape(str(Path(d) / f"train.{fmt}")) + r"(:\d+: |: no examples)", str(e)), str(e)
        else:
            assert all(ex.text_a.strip() for ex in task.train)


# One bad line among good ones: the kinds a new user meets. Each must be refused at its own line.
BAD_LINES = {
    "binary": b"\xff\xfe\x00\x01binary\tpos",
    "latin-1": "caf\xe9\tneg".encode("latin-1"),
    "missing column": b"no label column here",
    "extra column": b"text\tpos\tsurprise",
    "unknown label": b"text\tmaybe",
    "empty text": b" \tpos",
}


@given(kind=st.sampled_from(sorted(BAD_LINES)), at=st.integers(0, len(GOOD_ROWS)))
def test_one_bad_line_is_refused_at_that_line(kind, at):
    rows = [r.encode() for r in GOOD_ROWS]
    rows.insert(at, BAD_LINES[kind])
    with tempfile.TemporaryDirectory() as d:
        _task_dir(Path(d), b"s\ty\n" + b"\n".join(rows) + b"\n")
        with pytest.raises(TaskDataError) as info:
            load_task(SPEC, d)
    assert f"{Path(d) / 'train.tsv'}:{at + 2}: " in str(info.value)


def test_cli_finetune_on_a_binary_tsv_names_the_file_and_line(tmp_path, capsys):
    from eval_helpers import tiny_checkpoint

    from encoderlab.cli import main

    ck = tiny_checkpoint(tmp_path)
    (tmp_path / "glue" / "SST-2").mkdir(parents=True)
    (tmp_path / "glue" / "SST-2" / "train.tsv").write_bytes(b"\xff\xd8\xff\xe0 a JPEG, not a TSV\n")
    (tmp_path / "glue" / "SST-2" / "dev.tsv").write_bytes(b"sentence\tlabel\n")
    rc = main(["finetune", "--model", str(ck), "--task", "sst2", "--data-dir", str(tmp_path / "glue")])
    err = capsys.readouterr().err
    assert rc == 1 and f"{tmp_path / 'glue' / 'SST-2' / 'train.tsv'}:1: not UTF-8" in err, err


SPEC_KEYS = st.sampled_from(["name", "text_a", "text_b", "label", "kind", "format", "labels", "metrics", "epochs",
                             "eval_files", "template", "verbalizer", "header", "bogus_key"])
YAML_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False)
                           | st.text(max_size=8), lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)


@given(doc=st.dictionaries(SPEC_KEYS, YAML_VALUES, max_size=6) | YAML_VALUES | st.text(max_size=60))
def test_task_spec_yaml_loads_or_names_the_file_and_key(doc):
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "task.yaml"
        f.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
        try:
            spec = get_task(f)
        except ConfigError as e:
            assert str(f) in str(e)
            if isinstance(doc, dict) and "bogus_key" in doc:
                assert "bogus_key" in str(e) and "valid keys" in str(e)
        else:
            assert isinstance(spec, TaskSpec) and spec.name


@given(lines=st.lists(st.one_of(
    st.fixed_dictionaries({"sentence_good": st.text(max_size=6), "sentence_bad": st.text(max_size=6)}).map(
        lambda d: __import__("json").dumps(d)),
    st.sampled_from(['{"sentence_good": "x"}', "[1, 2]", "{broken", '"str"', "", "\udcff"])), max_size=6))
def test_minimal_pairs_load_or_name_the_file_and_line(lines):
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "pairs.jsonl"
        f.write_bytes("\n".join(lines).encode("utf-8", errors="surrogateescape"))
        try:
            pairs = read_minimal_pairs(f)
        except TaskDataError as e:
            assert str(e).startswith(f"{f}:"), str(e)
        else:
            assert pairs and all(p["sentence_good"].strip() and p["sentence_bad"].strip() for p in pairs)


@pytest.fixture(scope="module")
def text_tokenizer(tmp_path_factory):
    return load_tokenizer(write_vocab(tmp_path_factory.mktemp("tok")))


@given(template=st.lists(st.sampled_from(["{a}", "{b}", "[MASK]", " it was ", " . ", "zzz"]), max_size=6).map("".join),
       text=st.text(st.sampled_from("the cat sat "), max_size=200), max_length=st.integers(8, 40))
def test_prompt_templates_build_within_max_length_or_say_why_not(text_tokenizer, template, text, max_length):
    """Any template (repeated texts, several or no [MASK], longer than max_length on its own) either
    builds prompts within max_length, with the label slot at the [MASK], or is refused by name."""
    examples = [Example(text_a=text or "x", text_b=text, label=0, line=2)]
    try:
        prompts = build_prompts(text_tokenizer, template, examples, max_length)
    except ConfigError as e:
        assert repr(template) in str(e)
        assert template.count("[MASK]") != 1 or "max_length" in str(e)
    else:
        assert template.count("[MASK]") == 1
        assert all(len(p.ids) <= max_length and p.ids[p.mask_pos] == text_tokenizer.mask_id for p in prompts)


def test_template_longer_than_max_length_is_refused_by_name(text_tokenizer):
    with pytest.raises(ConfigError, match="max_length=16"):
        build_prompts(text_tokenizer, "zzz " * 20 + "[MASK] {a}", [Example("the cat", None, 0, 2)], 16)


def test_template_repeating_a_text_stays_within_max_length(text_tokenizer):
    """Found by the property above: the text budget counted {a} once however often it appeared."""
    prompts = build_prompts(text_tokenizer, "{a} {a} [MASK]", [Example("the cat sat " * 5, None, 0, 2)], 12)
    assert len(prompts[0].ids) <= 12 and prompts[0].ids[prompts[0].mask_pos] == text_tokenizer.mask_id


RECIPE_KEYS = st.sampled_from(["model", "objective", "data", "trainer", "optimizer", "name", "typo_key"])


@pytest.mark.parametrize("cls", [PretrainConfig, StudyConfig])
@given(doc=st.dictionaries(RECIPE_KEYS, YAML_VALUES, max_size=5) | YAML_VALUES | st.text(max_size=80))
def test_recipe_and_study_yaml_load_or_name_the_file_and_key(cls, doc):
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "recipe.yaml"
        f.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
        try:
            cls.from_yaml(f)
        except ConfigError as e:
            assert str(f) in str(e) or "missing" in str(e) or "required" in str(e), str(e)
            if isinstance(doc, dict) and "typo_key" in doc:
                assert "typo_key" in str(e) and "valid keys" in str(e)


@given(overrides=st.lists(st.tuples(st.sampled_from(["trainer.max_steps", "trainer.lr", "data.seq_len",
                                                     "model.preset", "trainer", "nope.deeper", "", "optimizer.lr"]),
                                    st.text(max_size=10)).map("=".join) | st.text(max_size=15), max_size=3))
def test_overrides_apply_or_name_the_key(overrides):
    base = PretrainConfig.from_yaml(Path(__file__).resolve().parents[1] / "recipes" / "bert-tiny.yaml")
    try:
        got = base.with_overrides(overrides)
    except EncoderlabError as e:
        # the message quotes the override, or names one of its dotted keys
        named = [repr(o) for o in overrides] + [k for o in overrides for k in o.split("=", 1)[0].strip().split(".")]
        assert any(n and n in str(e) for n in named), (overrides, str(e))
        return
    # Accepted: each key (the last override of it wins) holds its value, none silently dropped; a
    # key that is no field (trainer.lr, nope.deeper) or a section set to a scalar is never accepted.
    last = dict(o.split("=", 1) for o in overrides)
    assert not {"trainer.lr", "nope.deeper", "trainer"} & {k.strip() for k in last}, overrides
    for key, raw in last.items():
        node = got.to_dict()
        for part in key.strip().split("."):
            node = node[part]
        want = yaml.safe_load(raw)
        same = node == want or isinstance(node, (list, tuple)) and list(node) == list(want)
        assert same, (overrides, key, node, want)
