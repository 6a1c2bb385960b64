"""Runs that talk, in real processes with stderr piped (not a terminal, as under nohup or ``| tee``):
a status line at every log step, "resumed from step N (checkpoint ...)" on a resume, exit code 130
and no traceback on Ctrl-C (issue 34: minutes of silence, 143 for Ctrl-C, a KeyboardInterrupt
traceback from a study's speed stage)."""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.eval_helpers import tiny_checkpoint, write_sentiment_task
from tests.pretrain_helpers import tiny_model, tiny_recipe

ROOT = Path(__file__).resolve().parents[1]
IDS = dict(mask_token_id=3, special_token_ids=(0, 1, 2, 3, 4))
STATUS = re.compile(r"^encoderlab pretrain: step \d+ \| \d+\.\d% of the budget \| [\d,]+ tokens/s \| loss \d+\.\d{4} "
                    r"\| ETA \d+s$")


class Running:
    """A command with its stderr read line by line as it comes."""

    def __init__(self, *args: str):
        env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
        # SIGINT as a terminal's Ctrl-C finds it: a shell that starts pytest in the background without
        # job control (nohup ... &) leaves it ignored, and an ignored SIGINT is inherited.
        self.proc = subprocess.Popen([sys.executable, "-m", "encoderlab", *args], cwd=ROOT, env=env, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        self.err: list[str] = []
        self.reader = threading.Thread(target=lambda: self.err.extend(iter(self.proc.stderr.readline, "")))
        self.reader.start()

    def wait_for(self, pattern: str, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        while not any(re.search(pattern, line) for line in self.err):
            assert self.proc.poll() is None and time.time() < deadline, "".join(self.err)
            time.sleep(0.02)

    def finish(self, timeout: float = 60) -> tuple[int, str, str]:
        out = self.proc.stdout.read()
        rc = self.proc.wait(timeout=timeout)
        self.reader.join()
        return rc, out, "".join(self.err)


def test_pretrain_reports_status_exits_130_on_ctrl_c_and_says_where_it_resumed(tmp_path):
    cfg = tiny_recipe(tmp_path / "run", tiny_model("bert", head="mlm"), dict(kind="mlm", **IDS), steps=400,
                      log_every=2, checkpoint_every=0, progress=True)
    cfg = cfg.replace(data=cfg.data.replace(synthetic=cfg.data.synthetic.replace(delay_s=0.02)))
    cfg.to_yaml(tmp_path / "r.yaml")
    run = Running("pretrain", str(tmp_path / "r.yaml"))
    run.wait_for(r"step 6 \|")
    run.proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
    rc, out, err = run.finish()
    assert rc == 130 and "Traceback" not in err, err
    lines = err.splitlines()
    assert lines[0].startswith("encoderlab pretrain: budget: trainer.max_steps binds at 400 step(s)")
    status = [ln for ln in lines if ln.startswith("encoderlab pretrain: step ")]
    assert len(status) >= 3 and all(STATUS.match(ln) for ln in status), status
    stopped = int(re.search(r"interrupted: step (\d+)", out).group(1))
    rc, out, err = Running("pretrain", str(tmp_path / "r.yaml"), "trainer.max_steps=" + str(stopped + 2)).finish()
    assert rc == 0, err
    ckpt = tmp_path / "run" / "checkpoints" / f"step-{stopped:06d}"
    assert f"encoderlab pretrain: resumed from step {stopped} (checkpoint {ckpt})" in err.splitlines()


def test_finetune_reports_status_and_ctrl_c_exits_130_without_a_traceback(tmp_path):
    ckpt = tiny_checkpoint(tmp_path)
    write_sentiment_task(tmp_path / "task", n_train=256, n_dev=16)
    run = Running("finetune", "--model", str(ckpt), "--task", str(tmp_path / "task" / "task.yaml"), "epochs=1500",
                  "--out", str(tmp_path / "r.json"))
    # 1,500 epochs (12,000 steps, ~25 s): the signal always lands mid-run, on an idle machine too.
    run.wait_for(r"^encoderlab finetune: finetune seed 0: step \d+/12000 \(\d+%\), \d+ examples/s, loss \d\.\d{4}, "
                 r"ETA \d+s$")
    run.proc.send_signal(signal.SIGINT)
    rc, _, err = run.finish()
    assert rc == 130 and "Traceback" not in err and err.rstrip().endswith("encoderlab finetune: interrupted"), err


def test_ctrl_c_anywhere_in_a_command_is_one_line_and_130(monkeypatch, capsys):
    """The study's speed stage and every other command meet Ctrl-C as a KeyboardInterrupt: main
    answers it; a SIGTERM the study turned into one keeps its own code."""
    from encoderlab import cli
    from encoderlab.study import launch

    def interrupted(args):
        raise KeyboardInterrupt

    def terminated(args):
        launch._raise_interrupt(signal.SIGTERM, None)

    for func, code in ((interrupted, 130), (terminated, 143)):
        def parser(func=func):
            p = argparse.ArgumentParser()
            p.add_subparsers(dest="command").add_parser("demo").set_defaults(func=func)
            return p

        monkeypatch.setattr(cli, "build_parser", parser)
        assert cli.main(["demo"]) == code
        assert capsys.readouterr().err.strip() == "encoderlab demo: interrupted"


def test_pool_workers_leave_ctrl_c_to_the_study():
    from encoderlab.study.launch import worker_init

    before = signal.getsignal(signal.SIGINT)
    try:
        worker_init(None)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize("progress", [True, False])
def test_the_status_line_is_for_pipes_and_files_only(tmp_path, progress, capsys):
    from encoderlab.train.logger import MetricsLogger

    logger = MetricsLogger(tmp_path, enabled=True, progress=progress)  # stderr is captured: not a terminal
    logger.log("train", {"step": 50, "progress": 0.25, "elapsed_s": 30.0, "tokens_per_s": 1234.5, "loss": 2.5})
    logger.close()
    err = capsys.readouterr().err
    assert (err == "encoderlab pretrain: step 50 | 25.0% of the budget | 1,234 tokens/s | loss 2.5000 | ETA 1m30s\n"
            if progress else err == "")


def test_training_and_held_out_mlm_accuracy_measure_different_things_and_the_log_says_which():
    """Issue 34's Chinese run: held-out MLM accuracy far below training's. A model that only copies
    its input scores keep_fraction (+ a little) in training, where 10% of the chosen tokens are
    left visible, and nothing held out, where every chosen token is [MASK]: the log line says so."""
    from types import SimpleNamespace

    import torch

    from encoderlab.objectives import build_objective
    from encoderlab.objectives.base import ObjectiveConfig, with_defaults
    from encoderlab.train.config import DataConfig
    from encoderlab.train.data import SyntheticSource
    from encoderlab.train.evaluate import describe_accuracy, evaluate

    class Copier(torch.nn.Module):
        """Predicts, at each masked position, the token it sees there."""

        def __init__(self, vocab: int):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(()))
            self.encoder = SimpleNamespace(config=SimpleNamespace(vocab_size=vocab))

        def forward(self, ids, attention_mask=None, token_type_ids=None, positions=None):
            seen = ids.reshape(-1).index_select(0, positions)  # (M,)
            return SimpleNamespace(logits=torch.nn.functional.one_hot(seen, 99).float() * 10 + self.w,
                                   sentence_logits=None)

    cfg = with_defaults(ObjectiveConfig(kind="mlm", sentence_loss=False), 3, (0, 1, 2, 3, 4))
    batches = [SyntheticSource(DataConfig(kind="synthetic", batch_size=64, seq_len=64)).batch(i) for i in range(4)]
    num = den = 0.0
    for i, b in enumerate(batches):
        (n, d) = build_objective(cfg)(Copier(99), b, torch.Generator().manual_seed(i)).metrics["mlm_accuracy"]
        num, den = num + float(n), den + float(d)
    assert 0.08 < num / den < 0.13  # the kept 10% (and a random token that happens to be right)
    assert evaluate(Copier(99), cfg, batches, device="cpu")["eval_mlm_accuracy"] == 0.0
    said = describe_accuracy(cfg)
    assert "mlm_accuracy (training)" in said and "10% left as they are, which a model gets right by copying" in said
    assert "eval_mlm_accuracy (held-out) at 15% of tokens, each shown as [MASK]" in said
