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
    rc = main(["finetune", "--model", str(ckpt), "--task", str(spec), "--seeds", "2", "--out", str(out),
               "epochs=1", "learning_rate=1e-3", "warmup=0.2"])
    text = capsys.readouterr().out
    assert rc == 0 and "train: 128 examples; 0:" in text and "toy acc: median" in text  # balance printed first
    r = json.loads(out.read_text())
    assert len(r["seeds"]) == 2 and r["model"] == str(ckpt)
    assert (r["config"]["epochs"], r["config"]["learning_rate"], r["config"]["warmup"]) == (1, 1e-3, 0.2)
    rc = main(["eval", "glue", "--model", str(ckpt), "--tasks", f"{spec},{spec}", "--epochs", "1",  # an alias
               "--out", str(tmp_path / "g.json"), "--set", "max_length=32"])
    text = capsys.readouterr().out
    assert rc == 0 and "| Avg" in text and "median of 1 seed(s)" in text
    g = json.loads((tmp_path / "g.json").read_text())
    assert g["average"] >= 0 and next(iter(g["tasks"].values()))["config"]["max_length"] == 32


def test_flags_are_aliases_of_key_value_and_a_bad_key_fails_before_loading(capsys):
    from encoderlab.cli import build_parser
    from encoderlab.eval.cli import _config
    from encoderlab.eval.config import FinetuneConfig, PromptConfig

    parse = build_parser().parse_args
    old = parse(["finetune", "--model", "m", "--task", "t", "--lr", "1e-3", "--epochs", "2", "--max-train", "64",
                 "--no-bf16", "--set", "warmup=0.2"])
    new = parse(["finetune", "--model", "m", "--task", "t", "learning_rate=1e-3", "epochs=2",
                 "max_train_examples=64", "precision=fp32", "warmup=0.2"])
    assert _config(FinetuneConfig, old) == _config(FinetuneConfig, new) != FinetuneConfig()
    both = parse(["finetune", "--model", "m", "--task", "t", "--lr", "1e-3", "learning_rate=2e-3"])
    assert _config(FinetuneConfig, both).learning_rate == 2e-3  # key=value wins over the flag
    prompt = parse(["eval", "prompt", "--model", "m", "--task", "t", "--verbalizer", "bad,good", "steps=3"])
    assert _config(PromptConfig, prompt).verbalizer == ("bad", "good") and _config(PromptConfig, prompt).steps == 3
    assert main(["finetune", "--model", "nowhere", "--task", "t", "epoch=3"]) == 1
    assert "epoch" in capsys.readouterr().err


def test_fill_detect_pairs_commands_and_clear_errors(tmp_path, capsys):
    pair = tiny_checkpoint(tmp_path, "electra", "electra")
    assert main(["fill", "the [MASK] sat .", "--model", str(pair), "--top-k", "3"]) == 0
    assert capsys.readouterr().out.startswith("mask 1: ")
    assert main(["detect", "the cat sat .", "--model", str(pair)]) == 0
    assert "P(replaced)" in capsys.readouterr().out
    assert main(["eval", "minimal-pairs", "--model", str(pair), "--pairs", str(PAIRS), "precision=fp32"]) == 0
    out = capsys.readouterr().out
    assert "over 6 pairs (discriminator)" in out and "precision fp32" in out
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
    assert main(["eval", "pppl", "--model", str(ckpt), "--text-file", str(text), "max_length=32"]) == 0
    assert "over 11 tokens, 2 sentences" in capsys.readouterr().out
    spec = write_sentiment_task(tmp_path / "toy", n_train=64, n_dev=16)
    out = tmp_path / "p.json"
    assert main(["eval", "prompt", "--model", str(ckpt), "--task", str(spec), "--k", "0,4", "--seeds", "2",
                 "--steps", "2", "--out", str(out)]) == 0
    assert "k=4 mlm acc: median" in capsys.readouterr().out
    r = json.loads(out.read_text())
    assert set(r) == {"k0", "k4"} and len(r["k4"]["seeds"]) == 2 and r["k0"]["verbalizer"] == ["bad", "good"]
