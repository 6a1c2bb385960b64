"""The study's processes on a shared machine (issue 51): an interrupt is not a failure (Ctrl-C stops
the children, which save, and the study exits 130 with one line, never "failed" and a traceback), and
a run is handed its finished sibling's cores only when the machine's load leaves them free."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_data_helpers import write_corpus

from encoderlab.study import launch
from encoderlab.study.plan import recipe_fingerprint
from encoderlab.study.progress import Progress
from encoderlab.study.stages import Stages
from encoderlab.train.config import PretrainConfig, TrainerConfig

ROOT = Path(__file__).resolve().parents[1]


def _children(monkeypatch, tmp_path, scripts: dict[str, str]):
    """Each variant's pretraining replaced by a small Python script: (started processes, recipes)."""
    started = {}

    def start(recipe, env, threads=None):
        run_dir = launch.prepare_run_dir(recipe, threads)
        with open(run_dir / "pretrain.log", "a") as log:
            started[run_dir.name] = subprocess.Popen([sys.executable, "-c", scripts[run_dir.name]], stdout=log,
                                                     stderr=subprocess.STDOUT)
        return started[run_dir.name]

    monkeypatch.setattr(launch, "start_pretraining", start)
    return started, {n: PretrainConfig(trainer=TrainerConfig(run_dir=str(tmp_path / n), max_steps=1)) for n in scripts}


def test_a_child_interrupted_by_ctrl_c_stops_the_study_as_an_interrupt_not_a_failure(tmp_path, monkeypatch):
    """A child that saved and exited 130 (what `encoderlab pretrain` does on Ctrl-C) while the study
    itself saw no signal (started with SIGINT ignored): the study stops its other child and raises
    KeyboardInterrupt("signal 2"), which the command line prints as one line and exit 130. Before, it
    was "pretrain a failed (exit 130)" and a RuntimeError; only real failures say "failed"."""
    started, recipes = _children(monkeypatch, tmp_path, {
        "a": "import time; time.sleep(1); raise SystemExit(130)", "b": "import time; time.sleep(120)"})
    lines = []
    t0 = time.time()
    with pytest.raises(KeyboardInterrupt, match="signal 2"):
        launch.pretrain_all(recipes, jobs=2, threads=None, budget=1.0, stages=Stages(tmp_path / "stages.json"),
                            progress=Progress(20, lines.append, heartbeat_s=None), fingerprint=recipe_fingerprint)
    assert time.time() - t0 < 60 and started["b"].poll() is not None, "the other child outlived the study"
    assert any("pretrain a interrupted: its checkpoints are kept" in ln for ln in lines)
    assert any("pretrain b interrupted" in ln for ln in lines)  # stopped by the study (SIGTERM)
    assert not any("failed" in ln for ln in lines)
    for s in (signal.SIGINT, signal.SIGTERM):  # the study's own handlers are put back
        assert signal.getsignal(s) is not launch._raise_interrupt


STUDY = """name: interrupted
out_dir: {out}
corpus: [{corpus}]
vocab_size: 150
budget_flops: 1.0e14        # far beyond what the test waits for
threads: 1
base: {{data: {{seq_len: 32, batch_size: 8, eval_batches: 2}}, trainer: {{precision: fp32}}}}
eval_fractions: [1.0]
finetune_fractions: [1.0]
seeds: 1
latency: false
minimal_pairs: "off"
variants:
  - {{name: bert, model: {{preset: bert-tiny}}, objective: {{kind: mlm, sentence_loss: false}}}}
"""


def test_ctrl_c_stops_a_study_with_exit_130_and_one_line(tmp_path):
    """A real study and its real `encoderlab pretrain` child get Ctrl-C (SIGINT to the process group).
    The study runs as a script's background job, with SIGINT ignored as bash starts those: the issue's
    "pretraining failed (exit 130)" and 25-line traceback. (From a terminal the study takes the same
    path: while children run it answers SIGINT with its own handler, launch.interrupts_raise.) Exit
    130, one line on stderr, no "failed", and the child saved a checkpoint a rerun resumes from."""
    study = tmp_path / "study.yaml"
    study.write_text(STUDY.format(out=tmp_path / "out", corpus=write_corpus(tmp_path / "corpus", n_docs=20)))
    proc = subprocess.Popen([sys.executable, "-m", "encoderlab", "study", str(study)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    metrics = tmp_path / "out" / "runs" / "bert" / "metrics.jsonl"
    deadline = time.time() + 120
    while not (metrics.exists() and '"split": "run"' in metrics.read_text()):
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.1)
    time.sleep(1.0)  # the child is in its training loop
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, (out, err)
    assert err.strip() == "encoderlab study: interrupted", err  # no traceback, no RuntimeError
    assert "pretrain bert interrupted" in out and "failed" not in out
    assert list((tmp_path / "out" / "runs" / "bert" / "checkpoints").glob("step-*"))


def _machine(monkeypatch, *, load: float, cpus: int) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(os, "cpu_count", lambda: cpus)


def _spread(tmp_path, shares: dict, cores: int, said: dict) -> list[str]:
    recipes = {n: PretrainConfig(trainer=TrainerConfig(run_dir=str(tmp_path / n), max_steps=1)) for n in shares}
    lines = []
    launch.spread_threads(recipes, dict.fromkeys(shares), cores, shares, Progress(1, lines.append, heartbeat_s=None),
                          said)
    return lines


def test_a_run_is_not_handed_its_siblings_core_while_other_work_holds_it(tmp_path, monkeypatch):
    """Two cores, other work on both (load 3: this study's remaining one-thread run and two other
    busy threads): the run keeps its one thread, the progress line says why, once; when the load
    falls to the run's own, it gets both cores."""
    shares, said = {"electra@seed2": 1}, {}
    _machine(monkeypatch, load=3.0, cpus=2)
    lines = _spread(tmp_path, shares, 2, said)
    assert not (tmp_path / "electra@seed2" / "threads").exists() and shares == {"electra@seed2": 1}
    assert len(lines) == 1 and ("pretrain electra@seed2: stays at 1 thread, not 2: the machine's load average 3.0 "
                                "on 2 cores leaves no more cores free") in lines[0]
    assert _spread(tmp_path, shares, 2, said) == []  # said once, not at every check
    _machine(monkeypatch, load=1.2, cpus=2)  # the run's own thread and a little noise
    lines = _spread(tmp_path, shares, 2, said)
    assert (tmp_path / "electra@seed2" / "threads").read_text().strip() == "2" and shares == {"electra@seed2": 2}
    assert lines == [lines[0]] and "2 threads from its next log step (1 running)" in lines[0]


def test_only_the_free_cores_are_handed_and_none_taken_away(tmp_path, monkeypatch):
    """Eight cores, four busy with other work, one run of this study on two threads: it gets the two
    free cores (four threads), not the eight it would alone; a busier machine later takes none back."""
    shares, said = {"bert": 2}, {}
    _machine(monkeypatch, load=2.0 + 4.0, cpus=8)
    lines = _spread(tmp_path, shares, 8, said)
    assert shares == {"bert": 4} and (tmp_path / "bert" / "threads").read_text().strip() == "4"
    assert "4 threads from its next log step" in lines[0] and "stays at 4 threads, not 8" in lines[1]
    _machine(monkeypatch, load=4.0 + 8.0, cpus=8)
    assert _spread(tmp_path, shares, 8, said) == [] and shares == {"bert": 4}
