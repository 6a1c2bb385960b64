"""Task readers: real GLUE/ChnSentiCorp layouts, generic CSV/JSONL specs, errors that name file and line."""

import json

import pytest
from eval_helpers import one_thread, tiny_checkpoint  # noqa: F401

from encoderlab.eval.config import FinetuneConfig
from encoderlab.eval.finetune import finetune
from encoderlab.eval.tasks import BUILTIN, TaskDataError, TaskSpec, get_task, load_task

# Row counts of the official files (see ../shared/data/MANIFEST.md).
COUNTS = {"cola": (8551, 1043), "sst2": (67349, 872), "mrpc": (3668, 408), "stsb": (5749, 1500),
          "rte": (2490, 277), "wnli": (635, 71), "chnsenticorp": (9600, 1200)}


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_real_files_read_with_official_counts(shared_data, name):
    data = load_task(get_task(name), shared_data)
    assert (len(data.train), len(data.evals["dev"])) == COUNTS[name]
    summary = data.summary()
    assert "train" in summary and "dev" in summary


def test_real_file_details(shared_data):
    mrpc = load_task(get_task("mrpc"), shared_data)  # BOM before "Quality" must not hide the column
    first = mrpc.train[0]
    assert first.label == 1 and first.text_a.startswith("Amrozi") and first.text_b.startswith("Referring")
    rte = load_task(get_task("RTE"), shared_data / "glue")  # GLUE root or data root both work
    assert rte.labels == ("entailment", "not_entailment") and rte.train[0].label == 1
    stsb = load_task(get_task("sts-b"), shared_data)
    assert stsb.num_labels == 1 and stsb.train[1].label == pytest.approx(3.8)
    cola = load_task(get_task("cola"), shared_data)  # header-less, columns by index
    assert cola.train[0].text_a.startswith("Our friends won't buy")


def _tsv(tmp_path, text, name="train.tsv"):
    (tmp_path / name).write_text(text)
    return tmp_path


SPEC = TaskSpec(name="t", text_a="s", label="y", labels=("neg", "pos"), eval_files={"dev": "train.tsv"})


@pytest.mark.parametrize("body, message", [
    ("s\ty\nfine text\tpos\nother\tmaybe\n", "train.tsv:3: unknown label 'maybe'"),
    ("s\ty\nfine text\tpos\n \tneg\n", "train.tsv:3: empty text in column 's'"),
    ("s\ty\nfine\tpos\textra\n", "train.tsv:2: expected 2 columns, got 3"),
    ("text\ty\nfine\tpos\n", "train.tsv:1: column(s) ['s'] not found"),
])
def test_bad_rows_name_file_and_line(tmp_path, body, message):
    _tsv(tmp_path, body)
    with pytest.raises(TaskDataError) as e:
        load_task(SPEC, tmp_path)
    assert message in str(e.value)


def test_missing_file_and_missing_data_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("ENCODERLAB_DATA_DIR", raising=False)
    with pytest.raises(ValueError, match="--data-dir"):
        load_task(SPEC)
    with pytest.raises(TaskDataError, match="train.tsv not found"):
        load_task(SPEC, tmp_path)


def test_generic_csv_jsonl_and_inferred_labels(tmp_path):
    (tmp_path / "train.csv").write_text('q,p,score\n"a, quoted",second,0.5\nx,y,1.5\n')
    spec = TaskSpec(name="reg", format="csv", text_a="q", text_b="p", label="score", kind="regression",
                    train="train.csv", eval_files={"dev": "train.csv"}, metrics=("pearson",))
    data = load_task(spec, tmp_path)
    assert data.train[0].text_a == "a, quoted" and data.train[1].label == 1.5
    rows = [{"text": "good one", "label": "b"}, {"text": "bad one", "label": "a"}, {"text": "meh", "label": 7}]
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    spec = TaskSpec(name="j", format="jsonl", text_a="text", label="label", train="d.jsonl",
                    eval_files={"dev": "d.jsonl"})
    data = load_task(spec, tmp_path)
    assert data.labels == ("7", "a", "b") and [e.label for e in data.train] == [2, 1, 0]
    (tmp_path / "bad.jsonl").write_text('{"text": "ok", "label": 1}\n{"label": 1}\n')
    with pytest.raises(TaskDataError, match=r"bad.jsonl:2: missing key\(s\) \['text'\]"):
        load_task(spec.replace(train="bad.jsonl"), tmp_path)


def test_spec_yaml_round_trip_and_unknown_key(tmp_path):
    for spec in BUILTIN.values():
        assert TaskSpec.from_dict(spec.to_dict()) == spec
    p = tmp_path / "t.yaml"
    p.write_text("name: x\ntext_a: s\nlabel: y\ncolumn: 3\n")
    with pytest.raises(ValueError, match="unknown key"):
        get_task(p)
    p.write_text("name: x\ntext_a: s\nlabel: y\ndata_dir: sub\n")
    assert get_task(p).data_dir == str(tmp_path / "sub")
    with pytest.raises(ValueError, match="unknown task"):
        get_task("glue-nope")


def _write(d, name, header, rows):
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text("\n".join("\t".join(r) for r in [header, *rows]) + "\n")


def test_glue_layouts_absent_from_shared_data(tmp_path):
    """QQP, QNLI and MNLI in their official column layouts (the shared dir does not hold them)."""
    _write(tmp_path / "QQP", "train.tsv", ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
           [["0", "1", "2", "how are you?", "how do you do?", "1"]])
    _write(tmp_path / "QQP", "dev.tsv", ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
           [["5", "3", "4", "what?", "why?", "0"]])
    qqp = load_task(get_task("qqp"), tmp_path)
    assert qqp.train[0].text_b == "how do you do?" and qqp.evals["dev"][0].label == 0
    _write(tmp_path / "QNLI", "train.tsv", ["index", "question", "sentence", "label"],
           [["0", "q?", "s.", "not_entailment"]])
    _write(tmp_path / "QNLI", "dev.tsv", ["index", "question", "sentence", "label"], [["0", "q?", "s.", "entailment"]])
    assert load_task(get_task("qnli"), tmp_path).train[0].label == 1
    mnli_train = ["index", "promptID", "pairID", "genre", "s1b", "s2b", "s1p", "s2p", "sentence1", "sentence2",
                  "label1", "gold_label"]
    mnli_dev = mnli_train[:-1] + ["label2", "label3", "label4", "label5", "gold_label"]
    row = ["0", "1", "1e", "fiction", "(", "(", "(", "(", "a premise", "a hypothesis", "neutral"]
    _write(tmp_path / "MNLI", "train.tsv", mnli_train, [row + ["neutral"]])
    for split in ("dev_matched.tsv", "dev_mismatched.tsv"):
        _write(tmp_path / "MNLI", split, mnli_dev, [row + ["neutral"] * 4 + ["entailment"]])
    mnli = load_task(get_task("mnli"), tmp_path)
    assert set(mnli.evals) == {"m", "mm"} and mnli.evals["mm"][0].label == 1 and mnli.train[0].label == 2
    r = finetune(tiny_checkpoint(tmp_path, "bert", "mlm"), "mnli", FinetuneConfig(epochs=1), data_dir=tmp_path,
                 log=lambda *a: None)
    assert set(r["summary"]) == {"m_acc", "mm_acc"} and r["num_eval"] == {"m": 1, "mm": 1}
