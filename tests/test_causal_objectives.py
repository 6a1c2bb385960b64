"""Causal objectives (kinds clm, gptbert, clm_then_mlm): what each position may see, no future
leakage, the targets each prediction reads, overfit-one-batch, FLOPs against PyTorch's counter,
exact resume across clm_then_mlm's switch, held-out metrics, recipes and fine-tuning as an encoder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from encoderlab.data.masking import MaskingConfig
from encoderlab.models.config import ModelConfig
from encoderlab.objectives import ObjectiveConfig, build_networks, build_objective
from encoderlab.objectives.causal import attention_masks, next_token_positions
from encoderlab.train import PretrainConfig, pretrain
from encoderlab.train.config import DataConfig, SyntheticConfig
from encoderlab.train.data import SyntheticSource
from encoderlab.train.flops import phase_step_flops, planned_step_flops, step_flops
from tests.conftest import tiny_encoder
from tests.pretrain_helpers import read_metrics, tiny_recipe

IDS = dict(mask_token_id=3, special_token_ids=(0, 1, 2, 3, 4))
RECIPES = Path(__file__).resolve().parents[1] / "recipes"


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _mlm_model(**kw) -> ModelConfig:
    return ModelConfig(family="bert", head="mlm", encoder=tiny_encoder(**kw))


def _batch(B=8, T=16):
    cfg = DataConfig(kind="synthetic", batch_size=B, seq_len=T, synthetic=SyntheticConfig())
    return SyntheticSource(cfg, seed=3).batch(0)


def test_mask_visibility_causal_rows_bidirectional_rows_and_sequences():
    am = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
    mask = attention_masks(am, torch.tensor([True, False]))  # (2, 5, 5)
    tri = torch.ones(5, 5, dtype=torch.bool).tril()
    real = am.bool()
    # causal row: j <= i and key j real; a padded query still sees itself (never an empty row)
    assert torch.equal(mask[0, :4], (tri & real[0])[:4])
    assert mask[0, 4].tolist() == [True, True, True, True, True]
    assert torch.equal(mask[1], torch.ones(5, 5, dtype=torch.bool))  # bidirectional row: every real key
    seq = torch.tensor([[0, 0, 1, 1, 1], [0, 0, 0, 1, 1]])
    mask = attention_masks(torch.ones(2, 5), torch.tensor([True, False]), seq)
    assert mask[0, 2].tolist() == [False, False, True, False, False]  # a document's first token: itself
    assert mask[0, 4].tolist() == [False, False, True, True, True]
    assert mask[1, 0].tolist() == [True, True, True, False, False]  # bidirectional, within its sequence
    # next tokens: never into padding, never across a sequence boundary, only in the chosen rows
    pos = next_token_positions(torch.zeros(2, 5, dtype=torch.long), torch.tensor([[1, 1, 1, 0, 0], [1] * 5]),
                               torch.tensor([True, True]), seq)
    assert pos.tolist() == [0, 5, 6, 8]  # row 0: t=0 (t=1 -> 2 crosses); row 1: t=0, 1, 3


def test_no_future_leakage_in_causal_rows_and_bidirectional_masked_rows():
    """Changing tokens t+1.. leaves every causal output at <= t unchanged, in a gptbert batch whose
    other rows are bidirectional; those rows' outputs do change (the test can fail)."""
    torch.manual_seed(0)
    model = build_networks(_mlm_model(position="rope"), ObjectiveConfig(kind="clm", **IDS)).eval()
    ids = _batch(4, 12)["input_ids"]
    am = torch.ones_like(ids)
    causal = torch.tensor([True, True, False, False])
    t = 5
    changed = ids.clone()
    changed[:, t + 1:] = torch.randint(5, 99, (4, ids.shape[1] - t - 1), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a = model(ids, attention_masks(am, causal)).logits  # (B, T, V)
        b = model(changed, attention_masks(am, causal)).logits
    torch.testing.assert_close(a[:2, : t + 1], b[:2, : t + 1], atol=1e-6, rtol=0)
    assert (a[2:, : t + 1] - b[2:, : t + 1]).abs().max() > 1e-3


def test_targets_are_next_tokens_and_masked_tokens_read_one_position_earlier():
    """clm predicts ids[t + 1] from t; gptbert's masked rows predict the original at a masked t
    from the output at t - 1, with [MASK] at t in the input."""
    batch = _batch()
    ids = batch["input_ids"]
    seen = {}

    class Spy(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner, self.encoder, self.config = inner, inner.encoder, inner.config

        def forward(self, input_ids, attention_mask=None, token_type_ids=None, positions=None):
            seen.update(input_ids=input_ids, positions=positions, mask=attention_mask)
            return self.inner(input_ids, attention_mask, token_type_ids, positions=positions)

    torch.manual_seed(0)
    net = Spy(build_networks(_mlm_model(), ObjectiveConfig(kind="clm", **IDS)))
    out = build_objective(ObjectiveConfig(kind="clm", **IDS))(net, batch, torch.Generator().manual_seed(0))
    real_next = batch["attention_mask"][:, 1:].sum().item()
    assert out.num_masked == seen["positions"].numel() == real_next
    every_masked_one = MaskingConfig(mask_fraction=1.0, random_fraction=0.0, keep_fraction=0.0)
    cfg = ObjectiveConfig(kind="gptbert", causal_fraction=0.25, masking=every_masked_one, **IDS)
    build_objective(cfg)(net, batch, torch.Generator().manual_seed(0))
    B, T = ids.shape
    pos = seen["positions"]
    causal_pos, masked_read = pos[pos < 2 * T], pos[pos >= 2 * T]
    assert torch.equal(seen["input_ids"][:2], ids[:2])  # causal rows unmasked
    assert (seen["input_ids"].view(-1)[masked_read + 1] == 3).all()  # each read sits just before a [MASK]
    assert int((seen["input_ids"][2:] == 3).sum()) == masked_read.numel() > 0
    assert causal_pos.numel() == batch["attention_mask"][:2, 1:].sum().item()
    assert seen["mask"][:2].tril().equal(seen["mask"][:2]) and not seen["mask"][2:].tril().equal(seen["mask"][2:])


OVERFIT = {
    "clm": (dict(kind="clm"), {"clm_loss": 0.3}),
    "gptbert": (dict(kind="gptbert", causal_fraction=0.5), {"clm_loss": 0.3, "mlm_loss": 0.3}),
    "clm_then_mlm": (dict(kind="clm_then_mlm", causal_steps=60), {"mlm_loss": 0.3}),
}


@pytest.mark.parametrize("name", sorted(OVERFIT))
def test_overfit_one_batch(name):
    fields, thresholds = OVERFIT[name]
    torch.manual_seed(0)
    ocfg = ObjectiveConfig(**fields, **IDS)
    model = build_networks(_mlm_model(), ocfg)
    obj = build_objective(ocfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batch = _batch()
    phases = set()
    for step in range(120):
        obj.on_step_start(model, step)
        out = obj(model, batch, torch.Generator().manual_seed(0), step)
        phases.add("clm_loss" in out.metrics)
        opt.zero_grad()
        out.loss.backward()
        opt.step()
    final = {k: (n / d).item() for k, (n, d) in out.metrics.items()}
    for metric, limit in thresholds.items():
        assert final[metric] < limit, f"{name}: {metric} {final[metric]:.3f} not below {limit}"
    if name == "clm_then_mlm":
        assert phases == {True, False}  # both phases ran


def _measure(ocfg, step=0):
    model_cfg = _mlm_model()
    model = build_networks(model_cfg, ocfg)
    obj = build_objective(ocfg)
    batch = _batch(3, 16)
    batch["attention_mask"][1, 12:] = 0
    batch["input_ids"][1, 12:] = 0
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        out = obj(model, batch, torch.Generator().manual_seed(0), step)
        out.loss.backward()
    return step_flops(model_cfg, ocfg, 3, 16, out.num_masked).total, counter.get_total_flops()


@pytest.mark.parametrize("fields,step", [(dict(kind="clm"), 0), (dict(kind="gptbert", causal_fraction=0.34), 0),
                                         (dict(kind="clm_then_mlm", causal_steps=2), 1),
                                         (dict(kind="clm_then_mlm", causal_steps=2), 2)])
def test_step_flops_match_flop_counter(fields, step):
    analytic, measured = _measure(ObjectiveConfig(**fields, **IDS), step)
    assert abs(analytic - measured) / measured < 0.05, (analytic, measured)


def test_clm_then_mlm_costs_a_clm_step_then_an_mlm_step_and_plans_their_mean():
    ocfg = ObjectiveConfig(kind="clm_then_mlm", causal_steps=2, **IDS)
    assert _measure(ocfg, 1) == _measure(ObjectiveConfig(kind="clm", **IDS))
    assert _measure(ocfg, 2) == _measure(ObjectiveConfig(kind="mlm", **IDS))
    m, B, T = _mlm_model(), 8, 16
    clm = planned_step_flops(m, ObjectiveConfig(kind="clm", **IDS), B, T)
    mlm = planned_step_flops(m, ObjectiveConfig(kind="mlm", **IDS), B, T)
    assert clm == step_flops(m, ocfg, B, T, B * (T - 1)).total > mlm
    mixed = planned_step_flops(m, ObjectiveConfig(kind="clm_then_mlm", causal_fraction=0.25, **IDS), B, T)
    assert mixed == pytest.approx(0.25 * clm + 0.75 * mlm)
    # each phase at its own step cost, in order (a cost estimate times them at their own rates)
    phases = phase_step_flops(m, ObjectiveConfig(kind="clm_then_mlm", causal_fraction=0.25, **IDS), B, T)
    assert phases == [(0.25, clm), (0.75, mlm)]
    assert phase_step_flops(m, ObjectiveConfig(kind="clm", **IDS), B, T) == [(1.0, clm)]


TIMING = {"elapsed_s", "tokens_per_s", "peak_memory_mb", "threads"}


def test_resume_right_after_the_switch_reproduces_the_run_exactly(tmp_path, capsys):
    """16 steps, causal_fraction 0.5: steps 0-7 causal, the switch at 8; a run resumed from the
    step-8 checkpoint (its first step the first MLM one) matches the uninterrupted run."""
    objective = dict(kind="clm_then_mlm", causal_fraction=0.5, **IDS)
    cfg = tiny_recipe(tmp_path / "a", _mlm_model(), objective, steps=16, log_every=4, checkpoint_every=8,
                      keep_last=10, eval_every=8)
    full = pretrain(cfg)
    saved = PretrainConfig.from_yaml(tmp_path / "a" / "config.yaml")
    assert "causal (clm_*) for the first 8 optimizer steps, MLM from step 8 on" in capsys.readouterr().err
    assert full.step == 16 and saved.objective.causal_steps == 8
    a = read_metrics(tmp_path / "a")
    assert ["clm_loss" in r for r in a] == [True, True, False, False]  # steps 4, 8 causal; 12, 16 masked
    shutil.copytree(tmp_path / "a" / "checkpoints" / "step-000008", tmp_path / "b" / "checkpoints" / "step-000008")
    resumed = pretrain(cfg.replace(trainer=cfg.trainer.replace(run_dir=str(tmp_path / "b"))))
    b = read_metrics(tmp_path / "b")
    assert [r["step"] for r in b] == [12, 16]
    for ra, rb in zip(a[-2:], b):
        assert {k: v for k, v in ra.items() if k not in TIMING} == {k: v for k, v in rb.items() if k not in TIMING}
    assert read_metrics(tmp_path / "a", "eval")[-1] == read_metrics(tmp_path / "b", "eval")[-1]
    assert resumed.flops == full.flops and resumed.tokens == full.tokens
    # the FLOPs are the sum of 8 causal steps and 8 masked ones, each counted as the trainer counts them
    assert full.flops > 16 * planned_step_flops(_mlm_model(), ObjectiveConfig(kind="mlm", **IDS), 8, 16)


def test_held_out_evaluation_says_what_it_measures(tmp_path):
    """clm: next-token metrics only; gptbert: next-token and masked-token metrics, each over every row."""
    res = pretrain(tiny_recipe(tmp_path / "c", _mlm_model(), dict(kind="clm", **IDS), steps=2))
    assert {k for k in res.eval if k.startswith("eval_")} == {"eval_clm_loss", "eval_clm_accuracy", "eval_loss"}
    res = pretrain(tiny_recipe(tmp_path / "g", _mlm_model(), dict(kind="gptbert", causal_fraction=1.0, **IDS), steps=2))
    assert {"eval_clm_accuracy", "eval_mlm_accuracy"} <= set(res.eval)  # both, though training had no masked rows


@pytest.mark.parametrize("recipe", ["gpt-bert-tiny-deep.yaml", "clm-then-mlm-tiny-deep.yaml", "clm-tiny-deep.yaml"])
def test_recipes_run_from_the_command_line_and_fine_tune_as_bidirectional_encoders(tmp_path, recipe, capsys):
    from encoderlab.checkpoint import load_model
    from encoderlab.cli import main
    from encoderlab.eval.finetune import build_classifier

    cfg = PretrainConfig.from_yaml(RECIPES / recipe)
    assert cfg.objective.kind in ("gptbert", "clm_then_mlm", "clm")
    overrides = [f"trainer.run_dir={tmp_path}", "data.kind=synthetic", "data.batch_size=4", "data.seq_len=16",
                 "data.short_seq_len=8", "data.short_seq_steps=1", "data.eval_batches=1", "model.num_layers=1",
                 "model.vocab_size=99", "trainer.max_steps=4", "trainer.max_flops=null", "optimizer.warmup_steps=1",
                 "trainer.progress=false", "trainer.precision=fp32"]
    assert main(["pretrain", str(RECIPES / recipe), *overrides]) == 0
    out = capsys.readouterr().out
    assert "completed: step 4" in out and "eval_clm_*: next tokens under the causal mask" in out
    ckpt = sorted((tmp_path / "checkpoints").iterdir())[-1]
    clf = build_classifier(load_model(ckpt), 2).eval()
    ids = torch.tensor([[1, 20, 21, 22, 23, 2]])
    other = ids.clone()
    other[0, 4] = 40
    with torch.no_grad():  # [CLS]'s state depends on a later token: no causal mask at fine-tuning
        assert (clf.encoder(ids).hidden[0, 0] - clf.encoder(other).hidden[0, 0]).abs().max() > 1e-4


def test_gpt_bert_networks_read_each_token_from_the_position_before_it_and_checkpoints_keep_it(tmp_path):
    """build_networks marks a gptbert MaskedLM as a next-token head: logits for position p are the
    plain head's at p - 1 (sparse and dense), the objective's loss is the same on either network, the
    checkpoint keeps the mark (fill-mask and pseudo-log-likelihoods then read where it trained), and
    a transformers export, which would read at p, is refused."""
    import dataclasses

    from encoderlab.checkpoint import load_model
    from encoderlab.interop.hf import ExportError, check_exportable

    torch.manual_seed(0)
    cfg = ObjectiveConfig(kind="gptbert", **IDS)
    shifted = build_networks(_mlm_model(), cfg).eval()
    plain = build_networks(_mlm_model(), ObjectiveConfig(kind="mlm", **IDS)).eval()
    plain.load_state_dict(shifted.state_dict())
    assert shifted.config.next_token_head and not plain.config.next_token_head
    batch = _batch(4, 12)
    ids, T = batch["input_ids"], 12
    at = torch.tensor([3, 5, T + 2, 3 * T + 7])  # flat positions of predicted tokens
    with torch.no_grad():
        torch.testing.assert_close(shifted(ids, positions=at).logits, plain(ids, positions=at - 1).logits)
        torch.testing.assert_close(shifted(ids).logits[:, 1:], plain(ids).logits[:, :-1])
        losses = [build_objective(cfg)(net, batch, torch.Generator().manual_seed(0)).loss for net in (shifted, plain)]
    torch.testing.assert_close(losses[0], losses[1])
    res = pretrain(tiny_recipe(tmp_path, _mlm_model(), dict(kind="gptbert", **IDS), steps=2))
    assert load_model(res.checkpoint).config.next_token_head is True
    with pytest.raises(ExportError, match="next-token MLM head"):
        check_exportable(dataclasses.replace(_mlm_model(), next_token_head=True))
