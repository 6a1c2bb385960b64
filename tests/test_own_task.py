"""Your own task in five minutes: the README's section followed verbatim, a dev split taken from
train (seeded, stratified, written beside the results), every split checked before training, and
the random-initialisation control beside the pretrained scores (issue 34)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest
import torch

from encoderlab.checkpoint import load_model, save_model
from encoderlab.eval.finetune import build_classifier, predict
from encoderlab.eval.tasks import TaskDataError, TaskSpec, load_task
from tests.eval_helpers import one_thread, tiny_checkpoint  # noqa: F401  (fixture)

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_section(title: str) -> dict[str, list[str]]:
    """{language: [code blocks]} of one README section, in order."""
    text = README.read_text()
    start = text.index(f"### {title}\n")
    section = text[start: text.index("\n#", start + 4)]
    blocks: dict[str, list[str]] = {}
    for lang, body in re.findall(r"```(\w+)\n(.*?)```", section, re.S):
        blocks.setdefault(lang, []).append(body)
    return blocks


def test_the_readme_own_task_section_runs_verbatim(tmp_path, monkeypatch, capsys):
    from encoderlab.cli import main

    blocks = readme_section("Your own task")
    (tmp_path / "reviews").mkdir()
    (tmp_path / "reviews" / "train.csv").write_text(blocks["csv"][0])
    (tmp_path / "reviews.yaml").write_text(blocks["yaml"][0])
    command = shlex.split(blocks["bash"][0])
    assert command[0] == "encoderlab"
    run_dir = Path(command[command.index("--model") + 1])
    # The run directory the README's --model names: a pretraining's, with two checkpoints.
    ckpt = load_model(tiny_checkpoint(tmp_path / "made"))
    for step in (5, 10):
        save_model(ckpt, tmp_path / run_dir / "checkpoints" / f"step-{step:06d}", tokenizer_dir=tmp_path / "made/tok")
    monkeypatch.chdir(tmp_path)
    assert main(command[1:]) == 0
    out, err = capsys.readouterr()
    latest = run_dir / "checkpoints" / "step-000010"
    assert f"{run_dir} is a run directory: using its latest checkpoint, {latest}" in err
    assert re.search(r"finetune seed 2: step \d+/\d+ \(100%\), \d+ examples/s, loss \d\.\d{4}, ETA 0s", err)
    assert "reviews acc: median" in out and "random init acc: median" in out and "pretraining adds: acc " in out
    results = json.loads(next((tmp_path / "results").glob("finetune-reviews-*[0-9].json")).read_text())
    assert results["summary"]["acc"]["n"] == results["random_control"]["summary"]["acc"]["n"] == 3
    assert results["pretraining_gain"]["acc"] == pytest.approx(
        results["summary"]["acc"]["median"] - results["random_control"]["summary"]["acc"]["median"])
    assert [r["init"] for r in results["random_control"]["seeds"]] == ["random"] * 3
    split = results["split"]
    assert (split["train"], split["dev"]) == (4, 2) and split["stratified_by_label"]
    written = json.loads(next((tmp_path / "results").glob("*.split.json")).read_text())
    assert written["dev_lines"] == split["dev_lines"]
    assert sorted(e["label"] for e in written["dev_examples"]) == ["neg", "pos"]  # one of each: stratified


def _task(d: Path, rows: dict[str, int], **spec) -> TaskSpec:
    """Files of ``rows`` examples each (0: a header only), 'yes'/'no' labels alternating."""
    d.mkdir(parents=True, exist_ok=True)
    for name, n in rows.items():
        lines = ["text\tlabel"] + [f"example number {i}\t{'yes' if i % 2 else 'no'}" for i in range(n)]
        (d / name).write_text("\n".join(lines) + "\n")
    return TaskSpec(name="t", text_a="text", label="label", **spec)


@pytest.mark.parametrize("empty", ["train.tsv", "dev.tsv"])
def test_an_empty_or_header_only_split_is_refused_by_name_before_training(tmp_path, empty):
    spec = _task(tmp_path, {"train.tsv": 8, "dev.tsv": 4} | {empty: 0})
    with pytest.raises(TaskDataError, match=rf"{tmp_path / empty}: no examples \(an empty file, or a header only\)"):
        load_task(spec, tmp_path)
    (tmp_path / empty).write_text("")  # not even a header
    with pytest.raises(TaskDataError, match=rf"{tmp_path / empty}: no examples"):
        load_task(spec, tmp_path)


def test_the_dev_split_is_seeded_stratified_and_refused_beside_a_dev_file(tmp_path):
    spec = _task(tmp_path, {"train.tsv": 40}, dev_fraction=0.25)
    a, b = load_task(spec, tmp_path), load_task(spec, tmp_path)
    assert a.split["dev_lines"] == b.split["dev_lines"]  # reproducible
    assert len(a.evals["dev"]) == 10 and len(a.train) == 30
    assert sorted(e.label for e in a.evals["dev"]) == [0] * 5 + [1] * 5  # 25% of each label
    assert {e.line for e in a.train}.isdisjoint(a.split["dev_lines"])
    other = load_task(spec.replace(split_seed=1), tmp_path)
    assert other.split["dev_lines"] != a.split["dev_lines"]
    _task(tmp_path, {"dev.tsv": 4})  # now the task has its own dev file too
    with pytest.raises(TaskDataError, match="also has a dev file.*keep one"):
        load_task(spec, tmp_path)
    tiny = _task(tmp_path / "tiny", {"train.tsv": 2}, dev_fraction=0.1)
    with pytest.raises(TaskDataError, match="leaves no dev example"):
        load_task(tiny, tmp_path / "tiny")


def test_the_random_control_has_the_architecture_and_none_of_the_weights(tmp_path):
    pretrained = load_model(tiny_checkpoint(tmp_path))
    with torch.no_grad():  # "pretrained": weights no initialisation gives
        for p in pretrained.parameters():
            p.add_(1.0)
    torch.manual_seed(0)
    warm = build_classifier(pretrained, 2)
    torch.manual_seed(0)
    cold = build_classifier(pretrained, 2, fresh=True)
    torch.manual_seed(0)
    again = build_classifier(pretrained, 2, fresh=True)
    src = pretrained.encoder.state_dict()
    assert warm.encoder.state_dict().keys() == cold.encoder.state_dict().keys()
    w = "embeddings.word_embeddings.weight"
    assert torch.equal(warm.encoder.state_dict()[w], src[w]) and not torch.equal(cold.encoder.state_dict()[w], src[w])
    assert all(torch.equal(x, y) for x, y in zip(cold.state_dict().values(), again.state_dict().values()))  # seeded


def test_predict_on_no_examples_gives_no_rows_not_an_index_error(tmp_path):
    clf = build_classifier(load_model(tiny_checkpoint(tmp_path)), 3)
    assert predict(clf, [], pad_id=0, batch_size=4).shape == (0, 3)
    assert isinstance(predict(clf, [], pad_id=0, batch_size=4), np.ndarray)


def test_model_random_prefix_fine_tunes_fresh_weights_only_and_only_in_finetune(tmp_path, capsys):
    from encoderlab.cli import main
    from tests.eval_helpers import write_sentiment_task

    ckpt = tiny_checkpoint(tmp_path)
    write_sentiment_task(tmp_path / "task", n_train=32, n_dev=8)
    task = str(tmp_path / "task" / "task.yaml")
    out = tmp_path / "r.json"
    assert main(["finetune", "--model", f"random:{ckpt}", "--task", task, "epochs=1", "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["init"] == "random" and r["seeds"][0]["init"] == "random" and "random_control" not in r
    assert "random init (same architecture, fresh weights) acc: median" in capsys.readouterr().out
    assert main(["eval", "glue", "--model", f"random:{ckpt}", "--tasks", task]) == 1
    assert "random: (fresh weights) is for finetune only" in capsys.readouterr().err
