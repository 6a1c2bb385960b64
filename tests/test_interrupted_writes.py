"""Real processes killed with SIGKILL while they write: ``prepare``, ``tokenizer train``, ``convert``
and a study's fine-tuning results. A rerun resumes or starts clean, and no half-written file is
ever read as good (docs/reliability.md). Each kill waits for a sign that writing has begun."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from eval_helpers import tiny_checkpoint

from encoderlab.checkpoint import export_hf, load_model
from encoderlab.cli import main
from encoderlab.data.corpus import CorpusConfig
from encoderlab.data.prepare import PrepareConfig, prepare
from encoderlab.data.tokenizer import load_tokenizer, train_tokenizer

ROOT = Path(__file__).resolve().parents[1]
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")


def _kill_when(cmd: list[str], started, timeout: float = 60) -> subprocess.Popen:
    """Start ``cmd``; SIGKILL it as soon as ``started()`` is true (the write has begun)."""
    proc = subprocess.Popen(cmd, env=_env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + timeout
    while not started() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.002)
    proc.kill()
    proc.communicate(timeout=30)
    return proc


def _corpus(d: Path, docs: int) -> Path:
    rng = np.random.default_rng(0)
    d.mkdir()
    text = "\n\n".join(" ".join(rng.choice(WORDS, 40)) + ". " + " ".join(rng.choice(WORDS, 30)) + "."
                       for _ in range(docs))
    (d / "c.txt").write_text(text)
    return d


def _store_arrays(out: Path) -> dict[str, bytes]:
    return {str(f.relative_to(out)): np.load(f).tobytes() for f in sorted(out.glob("*/*/*.npy"))}


def test_prepare_killed_mid_store_resumes_to_the_same_store(tmp_path):
    corpus = _corpus(tmp_path / "corpus", 1500)
    tok = tmp_path / "tok"
    train_tokenizer([corpus.joinpath("c.txt").read_text()], vocab_size=60, out=tok)
    out = tmp_path / "store"
    manifest = out / "manifest.json"

    def two_shards_done() -> bool:
        try:
            return len(json.loads(manifest.read_text())["shards"]) >= 2
        except (OSError, ValueError):
            return False

    cmd = [sys.executable, "-m", "encoderlab", "prepare", "--corpus", str(corpus), "--tokenizer", str(tok),
           "--out", str(out), "--shard-chars", "4000"]
    proc = _kill_when(cmd, two_shards_done)
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "meta.json").exists(), "an interrupted store looks finished"
    done = json.loads(manifest.read_text())["shards"]
    assert 2 <= len(done) < 60, "killed too late to test a resume"
    for shard in done:  # every shard the manifest lists is whole
        for split in ("train", "valid"):
            assert len(list((out / split / shard).glob("*.npy"))) == 4

    cfg = PrepareConfig(corpus=CorpusConfig(paths=(str(corpus),)), shard_chars=4000)
    resumed = prepare(cfg, tok, out)
    reference = prepare(cfg, tok, tmp_path / "reference")
    assert resumed["counts"] == reference["counts"] and resumed["shards"] == reference["shards"]
    assert _store_arrays(out) == _store_arrays(tmp_path / "reference")
    assert not list(out.glob("*/*.tmp")), "temporary shard directories left behind"


def test_tokenizer_train_killed_while_saving_leaves_no_file_read_as_good(tmp_path):
    corpus = _corpus(tmp_path / "corpus", 300)
    out = tmp_path / "tok"
    cmd = [sys.executable, "-m", "encoderlab", "tokenizer", "train", "--corpus", str(corpus), "--vocab-size", "80",
           "--out", str(out)]
    _kill_when(cmd, out.exists)  # save() creates the directory, then writes its files
    if (out / "tokenizer.json").exists():  # written whole (renamed into place) or not at all
        assert load_tokenizer(out).vocab_size > 5
    assert main(cmd[3:]) == 0  # the rerun, in this process (a process start is slow on 2 cores)
    assert load_tokenizer(out).vocab_size > 5


def test_convert_killed_mid_write_then_rerun_gives_a_whole_checkpoint(tmp_path):
    src = tmp_path / "hf"
    export_hf(load_model(tiny_checkpoint(tmp_path)), src, tokenizer_dir=tmp_path / "bert-mlm")
    dst = tmp_path / "out"
    cmd = [sys.executable, "-m", "encoderlab", "convert", "--from-hf", str(src), str(dst)]
    _kill_when(cmd, lambda: any(tmp_path.glob(".out.tmp-*")))
    if dst.exists():  # the rename is the last step: a dst that exists is complete
        load_model(dst)
    assert main(cmd[3:]) == 0
    load_model(dst)  # verifies every sha256
    assert not list(tmp_path.glob(".out.*")), "the killed writer's temporary directory was left behind"


_STAGES_WRITER = """
import sys
from encoderlab.study.stages import Stages
stages = Stages(__import__("pathlib").Path(sys.argv[1]))
for i in range(100000):  # each result as large as a fine-tuning's, each stored as it finishes
    stages.put(f"finetune:v{i}", "fp", {"seeds": [{"scores": {"acc": 0.5}, "i": i}] * 400, "n": 400})
"""


def test_study_results_killed_mid_write_are_whole_or_absent(tmp_path):
    """The fine-tuning stage stores each result in stages.json (study.stages.Stages.put) as it finishes."""
    from encoderlab.study.stages import Stages

    path = tmp_path / "stages.json"
    _kill_when([sys.executable, "-c", _STAGES_WRITER, str(path)],
               lambda: path.exists() and path.stat().st_size > 300_000)
    stages = Stages(path)  # parses: never a half-written file
    assert len(stages.data) >= 2
    for key, rec in stages.data.items():
        assert len(rec["result"]["seeds"]) == rec["result"]["n"], key


pytestmark = pytest.mark.usefixtures("one_thread")
