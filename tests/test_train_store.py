"""pretrain on a real token store (encoderlab.data): MLM+NSP, ALBERT's SOP and ELECTRA through the
loader, the tokenizer copied into checkpoints, and exact resume of the loader's position."""

from __future__ import annotations

import shutil

import pytest
import torch

from encoderlab.data.prepare import PrepareConfig, prepare
from encoderlab.objectives import ObjectiveConfig
from encoderlab.train import DataConfig, ModelSpec, OptimizerConfig, PretrainConfig, TrainerConfig, pretrain
from tests.pretrain_helpers import read_metrics
from tests.test_data_helpers import tiny_tokenizer, write_corpus

TIMING = {"elapsed_s", "tokens_per_s", "peak_memory_mb"}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    corpus = write_corpus(root / "corpus", n_docs=60)
    tiny_tokenizer(root / "tok", corpus, vocab_size=300)
    from encoderlab.data.corpus import CorpusConfig

    prepare(PrepareConfig(corpus=CorpusConfig(paths=(str(corpus),)), valid_count=6), root / "tok", root / "store")
    return root / "store"


def _recipe(store, run_dir, preset, kind, steps=6, **trainer):
    t = dict(run_dir=str(run_dir), max_steps=steps, log_every=1, checkpoint_every=3, precision="fp32", progress=False)
    t.update(trainer)
    return PretrainConfig(
        model=ModelSpec(preset=preset, max_position_embeddings=64), objective=ObjectiveConfig(kind=kind),
        optimizer=OptimizerConfig(lr=1e-3),
        data=DataConfig(kind="store", path=str(store), batch_size=4, seq_len=32, eval_batches=2),
        trainer=TrainerConfig(**t))


@pytest.mark.parametrize("preset,kind,metric", [("bert-tiny", "mlm", "nsp_loss"), ("albert-tiny", "mlm", "sop_loss"),
                                                ("electra-tiny", "rtd", "disc_loss")])
def test_pretrain_on_a_token_store(store, tmp_path, preset, kind, metric):
    torch.set_num_threads(1)
    result = pretrain(_recipe(store, tmp_path, preset, kind))
    assert result.status == "completed"
    rows = read_metrics(tmp_path)
    assert len(rows) == 6 and metric in rows[-1]
    assert "eval_mlm_accuracy" in result.eval or "eval_gen_accuracy" in result.eval
    ckpt = tmp_path / "checkpoints" / "step-000006"
    sub = ckpt / "generator" if kind == "rtd" else ckpt
    assert (sub / "tokenizer.json").exists() or (sub / "vocab.txt").exists()


def test_resume_on_a_token_store_is_exact(store, tmp_path):
    torch.set_num_threads(1)
    cfg = _recipe(store, tmp_path / "a", "bert-tiny", "mlm", steps=8, keep_last=5)
    pretrain(cfg)
    shutil.copytree(tmp_path / "a/checkpoints/step-000003", tmp_path / "b/checkpoints/step-000003")
    pretrain(cfg.replace(trainer=cfg.trainer.replace(run_dir=str(tmp_path / "b"))))
    a = {r["step"]: {k: v for k, v in r.items() if k not in TIMING} for r in read_metrics(tmp_path / "a")}
    b = {r["step"]: {k: v for k, v in r.items() if k not in TIMING} for r in read_metrics(tmp_path / "b")}
    assert sorted(b) == list(range(4, 9))
    assert all(a[s] == b[s] for s in b)


def test_short_sequence_warmup_switches_and_resumes_exactly(store, tmp_path):
    """data.short_seq_steps: the first steps read short sequences (more rows, the same tokens per
    step), then full length; a resume inside the warm-up and one after the switch are both exact."""
    from encoderlab.train.data import make_source

    torch.set_num_threads(1)
    cfg = _recipe(store, tmp_path / "a", "bert-tiny", "mlm", steps=8, keep_last=5)
    cfg = cfg.replace(data=cfg.data.replace(short_seq_len=16, short_seq_steps=4))
    src = iter(make_source(cfg.data, split="train", rank=0, world_size=1, seed=0, pairs="nsp", grad_accum=1))
    shapes = [tuple(next(src)["input_ids"].shape) for _ in range(6)]
    assert shapes == [(8, 16)] * 4 + [(4, 32)] * 2
    pretrain(cfg)
    a = {r["step"]: {k: v for k, v in r.items() if k not in TIMING} for r in read_metrics(tmp_path / "a")}
    assert [a[s]["tokens"] for s in range(1, 9)] == [128 * s for s in range(1, 9)]
    for start, run in ((3, "b"), (6, "c")):  # inside the warm-up, after the switch
        name = f"step-{start:06d}"
        shutil.copytree(tmp_path / "a/checkpoints" / name, tmp_path / run / "checkpoints" / name)
        pretrain(cfg.replace(trainer=cfg.trainer.replace(run_dir=str(tmp_path / run))))
        b = {r["step"]: {k: v for k, v in r.items() if k not in TIMING} for r in read_metrics(tmp_path / run)}
        assert sorted(b) == list(range(start + 1, 9))
        assert all(a[s] == b[s] for s in b)


def test_short_sequence_warmup_config_errors():
    from encoderlab.config import ConfigError

    with pytest.raises(ConfigError, match="short_seq_len is not"):
        DataConfig(kind="synthetic", short_seq_steps=10)
    with pytest.raises(ConfigError, match="short_seq_len must be in"):
        DataConfig(kind="synthetic", seq_len=64, short_seq_len=64, short_seq_steps=10)
    assert DataConfig(kind="synthetic", batch_size=8, seq_len=128, short_seq_len=32).short().batch_size == 32
