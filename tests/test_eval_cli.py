"""The CLI end to end on tiny checkpoints: finetune, eval glue (generic tasks), fill, detect, pairs."""

import json
from pathlib import Path

from eval_helpers import one_thread, tiny_checkpoint, write_sentiment_task  # noqa: F401

from encoderlab.cli import main

PAIRS = Path(__file__).parent / "fixtures" / "minimal_pairs.jsonl"


def test_finetune_and_eval_glue_commands(tmp_path, capsys):
    ckpt = tiny_checkpoint(tmp_path, "bert", "mlm")
    spec = write_sentiment_task(tmp_path / "toy", n_train=128, n_dev=32)
    out = tmp_path / "r.json"
    rc = main(["finetune", "--model", str(ckpt), "--task", str(spec), "--seeds", "2", "--epochs", "1",
               "--lr", "1e-3", "--out", str(out), "--set", "warmup=0.2"])
    text = capsys.readouterr().out
    assert rc == 0 and "train: 128 examples; 0:" in text and "toy acc: median" in text  # balance printed first
    r = json.loads(out.read_text())
    assert len(r["seeds"]) == 2 and r["config"]["warmup"] == 0.2 and r["model"] == str(ckpt)
    rc = main(["eval", "glue", "--model", str(ckpt), "--tasks", f"{spec},{spec}", "--epochs", "1",
               "--out", str(tmp_path / "g.json")])
    text = capsys.readouterr().out
    assert rc == 0 and "| Avg" in text and "median of 1 seed(s)" in text
    assert json.loads((tmp_path / "g.json").read_text())["average"] >= 0


def test_fill_detect_pairs_commands_and_clear_errors(tmp_path, capsys):
    pair = tiny_checkpoint(tmp_path, "electra", "electra")
    assert main(["fill", "the [MASK] sat .", "--model", str(pair), "--top-k", "3"]) == 0
    assert capsys.readouterr().out.startswith("mask 1: ")
    assert main(["detect", "the cat sat .", "--model", str(pair)]) == 0
    assert "P(replaced)" in capsys.readouterr().out
    assert main(["eval", "minimal-pairs", "--model", str(pair), "--pairs", str(PAIRS)]) == 0
    assert "over 6 pairs (discriminator)" in capsys.readouterr().out
    disc = tiny_checkpoint(tmp_path, "electra", "discriminator")
    assert main(["fill", "a [MASK] .", "--model", str(disc)]) == 1
    assert "discriminator only" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntext_a: s\nlabel: y\n")
    assert main(["finetune", "--model", str(disc), "--task", str(bad), "--data-dir", str(tmp_path / "nowhere")]) == 1
    assert "train.tsv not found" in capsys.readouterr().err


def test_pppl_and_prompt_commands(tmp_path, capsys):
    ckpt = tiny_checkpoint(tmp_path, "bert", "mlm")
    text = tmp_path / "held_out.txt"
    text.write_text("the cat sat on the mat .\n\nthe dog ran .\n")
    assert main(["eval", "pppl", "--model", str(ckpt), "--text-file", str(text)]) == 0
    assert "over 11 tokens, 2 sentences" in capsys.readouterr().out
    spec = write_sentiment_task(tmp_path / "toy", n_train=64, n_dev=16)
    out = tmp_path / "p.json"
    assert main(["eval", "prompt", "--model", str(ckpt), "--task", str(spec), "--k", "0,4", "--seeds", "2",
                 "--steps", "2", "--out", str(out)]) == 0
    assert "k=4 mlm acc: median" in capsys.readouterr().out
    r = json.loads(out.read_text())
    assert set(r) == {"k0", "k4"} and len(r["k4"]["seeds"]) == 2 and r["k0"]["verbalizer"] == ["bad", "good"]
