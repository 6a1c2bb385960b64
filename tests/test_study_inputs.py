"""A newcomer's mistakes stop a study in seconds, before any tokenizer or token-store work (issue 51),
each with the message `encoderlab finetune` gives for the same file: a task spec that does not
exist, a label column that is not in the file, a label outside the spec's labels, a corpus path that
does not exist, a BLiMP folder that does not exist, a variant override no recipe has."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from test_data_helpers import write_corpus

from encoderlab.config import ConfigError
from encoderlab.eval.tasks import get_task, load_task
from encoderlab.study import runner
from encoderlab.study.config import StudyConfig
from encoderlab.study.runner import run_study

STUDY = {
    "name": "newcomer", "vocab_size": 300, "budget_flops": 2.0e9,
    "base": {"data": {"seq_len": 32, "batch_size": 8, "eval_batches": 2}, "trainer": {"precision": "fp32"}},
    "eval_fractions": [1.0], "finetune_fractions": [1.0], "seeds": 1, "latency": False, "minimal_pairs": "off",
    "variants": [
        {"name": "bert", "model": {"preset": "bert-tiny"}, "objective": {"kind": "mlm", "sentence_loss": False}},
        {"name": "electra", "model": {"preset": "electra-tiny"}, "objective": {"kind": "rtd"}}],
}
SPEC = "name: category\nformat: csv\ntext_a: review\nlabel: {label}\nlabels: [books, phones]\ndata_dir: .\n" \
       "train: train.csv\neval_files: {{dev: dev.csv}}\n"


def reviews_task(folder: Path, *, label: str = "cat", dev_label: str = "books") -> Path:
    """A two-class CSV task as a newcomer writes it: review and cat columns, a train and a dev file."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [("a long and clear story", "books"), ("the battery lasts two days", "phones")] * 4
    (folder / "train.csv").write_text("review,cat\n" + "".join(f"{t},{y}\n" for t, y in rows))
    (folder / "dev.csv").write_text(f"review,cat\nthe screen is bright,phones\nthe plot thickens,{dev_label}\n")
    spec = folder / "category.yaml"
    spec.write_text(SPEC.format(label=label))
    return spec


def stops_before_data(tmp_path: Path, monkeypatch, **study) -> str:
    """Run the study; return its error message, having checked it came in seconds with no data stage."""
    def data_stage(*a, **k):
        raise AssertionError("the data stage started before the study's inputs were checked")

    monkeypatch.setattr(runner, "prepare_data", data_stage)
    corpus = study.pop("corpus", None) or [str(write_corpus(tmp_path / "corpus"))]
    cfg = StudyConfig.from_dict({**STUDY, "out_dir": str(tmp_path / "study"), "corpus": corpus, **study})
    t0 = time.perf_counter()
    with pytest.raises((ConfigError, FileNotFoundError)) as e:
        run_study(cfg, log=lambda s: None)
    assert time.perf_counter() - t0 < 5.0
    assert not (tmp_path / "study" / "data").exists()  # no tokenizer, no token store
    return str(e.value)


def finetune_message(spec: Path) -> str:
    """What `encoderlab finetune` says of the same task (it loads the spec, then the files)."""
    with pytest.raises(ValueError) as e:
        load_task(get_task(spec))
    return str(e.value)


def test_a_task_spec_that_does_not_exist_is_named_as_a_missing_file(tmp_path, monkeypatch):
    reviews_task(tmp_path / "tasks")
    missing = tmp_path / "tasks" / "categroy.yaml"  # misspelled
    msg = stops_before_data(tmp_path, monkeypatch, tasks=[{"name": str(missing)}])
    assert f"tasks: {str(missing)!r}: task spec {missing}: file not found" in msg
    assert "unknown task" not in msg
    with pytest.raises(FileNotFoundError, match="file not found"):  # finetune's own error, the same words
        get_task(missing)


def test_a_label_column_that_is_not_in_the_file_stops_the_study_before_the_data_stage(tmp_path, monkeypatch):
    spec = reviews_task(tmp_path / "tasks", label="category")  # the column is "cat"
    msg = stops_before_data(tmp_path, monkeypatch, tasks=[{"name": str(spec)}])
    assert finetune_message(spec) in msg
    assert f"{tmp_path / 'tasks' / 'train.csv'}:1: column(s) ['category'] not found; columns: ['review', 'cat']" in msg


def test_a_label_outside_the_specs_labels_stops_the_study_naming_file_and_line(tmp_path, monkeypatch):
    spec = reviews_task(tmp_path / "tasks", dev_label="toys")  # in dev only: every split is read
    msg = stops_before_data(tmp_path, monkeypatch, tasks=[{"name": str(spec)}])
    assert finetune_message(spec) in msg
    assert f"{tmp_path / 'tasks' / 'dev.csv'}:3: unknown label 'toys'" in msg


def test_a_corpus_path_that_does_not_exist_stops_the_study_before_the_data_stage(tmp_path, monkeypatch):
    msg = stops_before_data(tmp_path, monkeypatch, corpus=[str(tmp_path / "corpus" / "reviws.txt")])
    assert f"corpus path {tmp_path / 'corpus' / 'reviws.txt'} does not exist" in msg


def test_a_blimp_folder_that_does_not_exist_stops_the_study_before_the_data_stage(tmp_path, monkeypatch):
    msg = stops_before_data(tmp_path, monkeypatch, blimp=str(tmp_path / "blimp"))
    assert f"blimp: {tmp_path / 'blimp'}: no such folder" in msg
    (tmp_path / "blimp").mkdir()  # there, but without paradigm files
    msg = stops_before_data(tmp_path, monkeypatch, blimp=str(tmp_path / "blimp"))
    assert "no BLiMP paradigm files" in msg


def test_a_variant_override_no_recipe_has_stops_the_study_before_the_data_stage(tmp_path, monkeypatch):
    variants = [STUDY["variants"][0], {**STUDY["variants"][1], "overrides": ["optimizer.lrr=5e-4"]}]
    msg = stops_before_data(tmp_path, monkeypatch, variants=variants)
    assert msg.startswith("variant 'electra': ") and "lrr" in msg


def test_good_inputs_pass_the_checks_and_reach_the_data_stage(tmp_path, monkeypatch):
    """The same study with its task right goes on to the data stage (where this test stops it)."""
    spec = reviews_task(tmp_path / "tasks")

    def data_stage(*a, **k):
        raise RuntimeError("data stage reached")

    monkeypatch.setattr(runner, "prepare_data", data_stage)
    cfg = StudyConfig.from_dict({**STUDY, "out_dir": str(tmp_path / "study"), "tasks": [{"name": str(spec)}],
                                 "corpus": [str(write_corpus(tmp_path / "corpus"))]})
    with pytest.raises(RuntimeError, match="data stage reached"):
        run_study(cfg, log=lambda s: None)
