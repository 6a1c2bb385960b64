"""The held-out count baselines score exactly the positions the trainer's evaluation masks: an MLM
whose every prediction is the unigram distribution, evaluated on the trainer's held-out batches, scores
the unigram baseline's accuracy and loss."""

from __future__ import annotations

import pytest
import torch

from encoderlab.data.corpus import CorpusConfig
from encoderlab.data.prepare import PrepareConfig, prepare
from encoderlab.nn.heads import MLMHead
from encoderlab.train import PretrainConfig, Trainer
from encoderlab.train.baselines import count_baselines
from encoderlab.train.evaluate import evaluate
from tests.test_data_helpers import tiny_tokenizer, write_corpus


def test_a_unigram_network_scores_the_unigram_baseline_in_the_trainer_evaluation(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", n_docs=30)
    tiny_tokenizer(tmp_path / "tok", corpus, vocab_size=300)
    prepare(PrepareConfig(corpus=CorpusConfig(paths=(str(corpus),)), valid_count=6), tmp_path / "tok",
            tmp_path / "store")
    cfg = PretrainConfig.from_dict({
        "model": {"preset": "bert-tiny"}, "objective": {"kind": "mlm", "sentence_loss": False},
        "data": {"kind": "store", "path": str(tmp_path / "store"), "tokenizer_dir": str(tmp_path / "tok"),
                 "batch_size": 4, "seq_len": 32, "eval_batches": 3},
        "trainer": {"run_dir": str(tmp_path / "run"), "precision": "fp32", "seed": 7, "max_steps": 1}})
    base = count_baselines(cfg)
    assert 0 < base["unigram"] < 1 and 0 <= base["bigram"] <= 1 and base["positions"] > 20

    trainer = Trainer(cfg)
    head = next(m for m in trainer.model.modules() if isinstance(m, MLMHead))
    with torch.no_grad():  # every position's logits: the unigram log-probabilities (the head's input zeroed)
        head.layer_norm.weight.zero_()
        head.layer_norm.bias.zero_()
        head.bias.copy_(unigram_logits(cfg))
    ev = evaluate(trainer.model, trainer.ocfg, trainer.eval_batches, device=trainer.device, precision="fp32")
    assert ev["eval_mlm_accuracy"] == pytest.approx(base["unigram"], abs=1e-9)
    normalizer = torch.logsumexp(head.bias, 0).item()  # the baseline clips zero counts to one
    assert ev["eval_mlm_loss"] == pytest.approx(base["unigram_loss"] + normalizer, rel=1e-5)


def unigram_logits(cfg: PretrainConfig) -> torch.Tensor:
    """log(count / total) of every training token, specials counted as zero (clipped to one)."""
    from encoderlab.data.store import TokenStore

    store = TokenStore(cfg.data.path, "train")
    counts = torch.zeros(store.vocab_size, dtype=torch.float64)
    for shard in store.tokens:
        counts += torch.bincount(torch.as_tensor(shard.astype("int64")), minlength=store.vocab_size).double()
    counts[sorted(set(store.special_ids.values()))] = 0
    return (counts.clamp(min=1) / counts.sum()).log().float()
