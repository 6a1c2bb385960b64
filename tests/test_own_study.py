"""Your own study: the README's section followed verbatim (issue 51). Its study file over a corpus of
one document a line and two task specs is priced with `--plan` (every file read, the jobs counted,
no compute), then run at a budget shrunk by command-line overrides, as the README says a user may;
the report opens with "Did pretraining help?" and names the tasks by their specs' names."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from test_data_helpers import english_text
from test_own_task import readme_section

from encoderlab.cli import main

TINY = ["budget_flops=2e9", "vocab_size=300", "pretrain_seeds=1", "seeds=1", "eval_fractions=[1.0]",
        "finetune_fractions=[1.0]", "latency=false", "minimal_pairs='off'", "speed_seconds=0.02", "finetune.epochs=1",
        "base={data: {seq_len: 32, batch_size: 8, eval_batches: 2}, trainer: {precision: fp32}}", "threads=1"]


def user_files(tmp_path: Path) -> list[list[str]]:
    """The README's study file, its corpus folder and its two task specs (reviews as in "Your own
    task"); the section's commands, split."""
    study = readme_section("Your own study")
    (tmp_path / "my_study.yaml").write_text(study["yaml"][0])
    (tmp_path / "my_texts").mkdir()
    lines = " ".join(english_text(40, 0).split("\n\n")).split(". ")
    (tmp_path / "my_texts" / "corpus.txt").write_text("\n".join(lines) + "\n")
    task = readme_section("Your own task")
    (tmp_path / "reviews").mkdir()
    (tmp_path / "reviews" / "train.csv").write_text(task["csv"][0])
    (tmp_path / "reviews.yaml").write_text(task["yaml"][0])
    (tmp_path / "topics").mkdir()
    rows = [(f"the {w} team won the match", "sport") for w in ("home", "away", "young", "old")] + \
           [(f"the {w} bank raised its rates", "money") for w in ("big", "small", "local", "central")]
    (tmp_path / "topics" / "train.tsv").write_text("text\ttopic\n" + "".join(f"{t}\t{y}\n" for t, y in rows))
    (tmp_path / "topics.yaml").write_text("name: topics\ntext_a: text\nlabel: topic\ndata_dir: topics\n"
                                          "train: train.tsv\ndev_fraction: 0.25\n")
    commands = [shlex.split(line.split("#")[0]) for line in study["bash"][0].strip().splitlines()]
    assert all(c[:3] == ["encoderlab", "study", "my_study.yaml"] for c in commands)
    return commands


@pytest.mark.slow
def test_the_readme_own_study_is_planned_then_run_verbatim(tmp_path, monkeypatch, capsys):
    plan, run = user_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(plan[1:] + ["threads=1"]) == 0  # one thread: the suite's workers share the cores
    out = capsys.readouterr().out
    assert "[study]   pretraining: 6 job(s)" in out  # 2 variants x 3 pretraining runs
    assert "[study]   fine-tuning: 72 job(s)" in out  # x 2 budget fractions (0.5 and 1) x 2 tasks x 3 seeds
    assert "[study]   random-init control: 12 job(s)" in out  # 2 architectures x 2 tasks x 3 seeds
    assert len([line for line in out.splitlines() if "will not run" in line]) == 1
    assert not (tmp_path / "runs" / "my-study" / "stages.json").exists()  # nothing computed

    assert main(run[1:] + TINY) == 0
    report = (tmp_path / "runs" / "my-study" / "report.md").read_text()
    assert "## Did pretraining help?" in report.split("\n## ")[1][:40] or \
        report.index("## Did pretraining help?") < report.index("## Claims")
    assert "| reviews |" in report and "| topics |" in report  # the specs' names, not their paths
    assert "Each pretraining run's mean" not in report  # one run a variant: nothing more to show
    assert "reviews.yaml" not in report.split("## Resolved config")[0]
    # only the claims the study can run have sections; the rest are one line
    assert "### 5a. ELECTRA beats BERT" in report and "### 10." not in report
    assert "Not run, for want of their variants or probes in this study" in report
    # the resolved config: each objective's fields that act on its kind
    config = report.split("## Resolved config")[1]
    bert, electra = config.split("- name: electra")
    assert "sentence_loss: false" in bert and "disc_weight" not in bert and "span_p" not in bert
    assert "disc_weight: 50.0" in electra and "sentence_loss" not in electra
