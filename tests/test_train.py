"""The trainer in-process: configs, schedule, exact resume from a checkpoint, corrupt checkpoints,
the NaN guard, budgets, keep-last-K, continued pretraining."""

from __future__ import annotations

import math
import shutil

import pytest
import torch

from encoderlab.checkpoint import CheckpointError, load_model
from encoderlab.config import ConfigError
from encoderlab.models.build import build_model
from encoderlab.train import OptimizerConfig, PretrainConfig, Trainer, pretrain
from encoderlab.train.config import InitConfig
from encoderlab.train.optim import lr_factor, param_groups
from encoderlab.train.state import list_checkpoints
from tests.pretrain_helpers import objective_cases, read_metrics, tiny_model, tiny_recipe

IDS = dict(mask_token_id=3, special_token_ids=(0, 1, 2, 3, 4))
TIMING = {"elapsed_s", "tokens_per_s", "peak_memory_mb"}


pytestmark = pytest.mark.usefixtures("one_thread")


def test_recipe_round_trip_and_unknown_keys(tmp_path):
    cfg = tiny_recipe(tmp_path, tiny_model("electra"), dict(kind="rtd", **IDS))
    assert PretrainConfig.from_dict(cfg.to_dict()) == cfg
    (tmp_path / "r.yaml").write_text(cfg.to_yaml())
    assert PretrainConfig.from_yaml(tmp_path / "r.yaml") == cfg
    with pytest.raises(ConfigError, match="valid keys"):
        cfg.with_overrides(["trainer.max_stepz=3"])
    assert cfg.with_overrides(["trainer.max_steps=7"]).trainer.max_steps == 7
    with pytest.raises(ConfigError, match="budget"):
        cfg.with_overrides(["trainer.max_steps=null"])


def test_schedule_warmup_then_linear_or_cosine_decay():
    lin = OptimizerConfig(warmup_steps=10, schedule="linear")
    assert lr_factor(lin, 0, 0.0) == pytest.approx(0.1)
    assert lr_factor(lin, 9, 0.09) == pytest.approx(0.91)
    assert lr_factor(lin, 50, 0.5) == pytest.approx(0.5)
    assert lr_factor(lin, 100, 1.0) == 0.0
    cos = OptimizerConfig(schedule="cosine", min_lr_ratio=0.1)
    assert lr_factor(cos, 50, 0.5) == pytest.approx(0.1 + 0.9 * 0.5)
    assert lr_factor(cos, 100, 1.0) == pytest.approx(0.1)
    wsd = OptimizerConfig(schedule="wsd", warmup_steps=10, decay_fraction=0.2)
    assert lr_factor(wsd, 4, 0.04) == pytest.approx(0.5)  # warm-up
    assert lr_factor(wsd, 50, 0.5) == 1.0 and lr_factor(wsd, 79, 0.79) == 1.0  # stable until the last 20%
    assert lr_factor(wsd, 90, 0.9) == pytest.approx(0.5)  # linear decay over the last 20%
    assert lr_factor(wsd, 100, 1.0) == 0.0
    with pytest.raises(ConfigError, match="decay_fraction"):
        OptimizerConfig(schedule="wsd", decay_fraction=0.0)


def test_no_weight_decay_on_biases_and_layer_norms():
    model = build_model(tiny_model("bert"))
    decay, no_decay = param_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    assert all(p.ndim == 2 for p in decay["params"])
    assert all("bias" in names[id(p)] or "layer_norm" in names[id(p)] for p in no_decay["params"])
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0


CASES = {k: v for k, v in objective_cases(two_stage_steps=8).items()
         if k in ("bert-nsp", "bert-proposal", "electra-gdes", "replace-mlm", "replace-mlm-gdes", "two-stage",
                  "all-tokens-mlm-copy")}


@pytest.mark.parametrize("name", sorted(CASES))
def test_resume_from_a_checkpoint_reproduces_the_run_exactly(tmp_path, name):
    model, objective, pairs = CASES[name]
    cfg = tiny_recipe(tmp_path / "a", model(), dict(objective, **IDS), steps=16, pairs=pairs, log_every=3,
                      checkpoint_every=5, keep_last=10, eval_every=8)
    full = pretrain(cfg)
    assert full.status == "completed" and full.step == 16
    # An interrupted run is one whose directory holds only the step-5 checkpoint: rebuild it so.
    shutil.copytree(tmp_path / "a" / "checkpoints" / "step-000010", tmp_path / "b" / "checkpoints" / "step-000010")
    resumed = pretrain(cfg.replace(trainer=cfg.trainer.replace(run_dir=str(tmp_path / "b"))))
    a, b = read_metrics(tmp_path / "a"), read_metrics(tmp_path / "b")
    assert [r["step"] for r in b] == [12, 15, 16]
    for ra, rb in zip(a[-3:], b):
        assert {k: v for k, v in ra.items() if k not in TIMING} == {k: v for k, v in rb.items() if k not in TIMING}
    assert read_metrics(tmp_path / "a", "eval")[-1] == read_metrics(tmp_path / "b", "eval")[-1]
    assert resumed.flops == full.flops and resumed.tokens == full.tokens
    ablation = name.startswith(("replace-mlm", "all-tokens-mlm"))  # an MLMPair: its checkpoint is the MLM
    wa = load_model(full.checkpoint if not ablation else tmp_path / "a/checkpoints/step-000016")
    wb = load_model(resumed.checkpoint)
    for (ka, va), (kb, vb) in zip(wa.state_dict().items(), wb.state_dict().items()):
        assert ka == kb and torch.equal(va, vb)
    if objective.get("copy_mechanism"):  # the gate lives in the trainer state, not in the MLM
        ga, gb = (_gate(tmp_path / r / "checkpoints/step-000016") for r in "ab")
        assert set(ga) == {"copy_gate.weight", "copy_gate.bias"} and all(torch.equal(ga[k], gb[k]) for k in ga)
        assert ga["copy_gate.bias"].abs().item() > 0  # it trained (it starts at 0)


def _gate(checkpoint) -> dict:
    from safetensors.torch import load_file

    return {k: v for k, v in load_file(checkpoint / "trainer_state.safetensors").items() if k.startswith("copy_gate.")}


def test_an_mlm_ablation_with_gdes_saves_a_plain_mlm_that_fine_tunes(tmp_path):
    """Replace-MLM of a gdes ELECTRA: its checkpoint is the MLM with effective tables (E_G + delta),
    loadable on its own (fine-tuning, fill-mask, export) with the trained MLM's outputs, and a
    classifier built from it starts from those weights."""
    from encoderlab.eval.finetune import build_classifier

    model, objective, _ = objective_cases(two_stage_steps=8)["replace-mlm-gdes"]
    cfg = tiny_recipe(tmp_path, model(), dict(objective, **IDS), steps=6, checkpoint_every=0)
    trainer = Trainer(cfg)
    result = trainer.fit()
    assert trainer.model.mlm.encoder.embeddings.word_embeddings.delta.abs().sum() > 0  # it trained
    saved = load_model(result.checkpoint).eval()
    ids = torch.randint(5, 99, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(saved(ids).logits, trainer.model.mlm.eval()(ids).logits, atol=1e-6, rtol=1e-6)
        clf = build_classifier(saved, 2).eval()
        torch.testing.assert_close(clf.encoder(ids).hidden, trainer.model.mlm.encoder(ids).hidden, atol=1e-6, rtol=1e-6)
    # Continued pretraining from it into a fresh gdes pair: the MLM starts from the saved tables
    # (each delta = saved table - the fresh generator's), not from zero deltas.
    from encoderlab.train.init import initialize_from

    fresh = Trainer(cfg.replace(trainer=cfg.trainer.replace(run_dir=str(tmp_path / "fresh")))).model
    initialize_from(fresh, InitConfig(checkpoint=result.checkpoint))
    with torch.no_grad():
        torch.testing.assert_close(fresh.mlm.eval()(ids).logits, saved(ids).logits, atol=1e-5, rtol=1e-5)


def test_a_checkpoint_and_a_model_that_disagree_on_the_copy_gate_are_refused(tmp_path):
    from encoderlab.objectives import ObjectiveConfig, build_networks
    from encoderlab.train.state import load_weights

    model, objective, _ = objective_cases(two_stage_steps=8)["all-tokens-mlm"]
    result = pretrain(tiny_recipe(tmp_path, model(), dict(objective, **IDS), steps=2, checkpoint_every=0))
    gated = build_networks(model(), ObjectiveConfig(**objective, copy_mechanism=True, **IDS))
    with pytest.raises(CheckpointError, match="holds no copy gate.*trained without one"):
        load_weights(tmp_path / "checkpoints/step-000002", gated)
    assert result.status == "completed"
    # ... and the other way: a gated run's checkpoint refused by a model without the gate
    pretrain(tiny_recipe(tmp_path / "gated", model(), dict(objective, copy_mechanism=True, **IDS), steps=2,
                         checkpoint_every=0))
    with pytest.raises(CheckpointError, match="holds a copy gate.*trained with one"):
        load_weights(tmp_path / "gated/checkpoints/step-000002", build_networks(model(), ObjectiveConfig(**objective,
                                                                                                      **IDS)))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_a_cuda_run_without_cuda_fails_before_building_anything(tmp_path):
    cfg = tiny_recipe(tmp_path, tiny_model("bert", head="mlm"), dict(kind="mlm", **IDS), steps=2, device="cuda")
    with pytest.raises(RuntimeError, match="device='cuda' but this torch sees no CUDA device"):
        pretrain(cfg)
    assert not (tmp_path / "checkpoints").exists()


def test_keep_last_and_resolved_config(tmp_path):
    cfg = tiny_recipe(tmp_path, tiny_model("bert", head="mlm"), dict(kind="mlm", **IDS), steps=9,
                      checkpoint_every=2, keep_last=2)
    pretrain(cfg)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-000008", "step-000009"]
    saved = PretrainConfig.from_yaml(tmp_path / "config.yaml")
    assert saved.model.config == cfg.model.config and saved.objective.mask_token_id == 3
    assert (tmp_path / "checkpoints" / "step-000009" / "config.json").exists()  # transformers-loadable


@pytest.mark.parametrize("victim", ["model.safetensors", "trainer_state.safetensors", "trainer_state.json"])
def test_a_corrupt_checkpoint_is_refused(tmp_path, victim):
    cfg = tiny_recipe(tmp_path, tiny_model("bert", head="mlm"), dict(kind="mlm", **IDS), steps=4,
                      checkpoint_every=2, keep_last=5)
    pretrain(cfg)
    f = tmp_path / "checkpoints" / "step-000004" / victim
    f.write_bytes(f.read_bytes()[: len(f.read_bytes()) // 2])
    with pytest.raises(CheckpointError, match="step-000004.*(corrupt|truncated|sha256)") as e:
        pretrain(cfg.replace(trainer=cfg.trainer.replace(max_steps=6)))
    assert "step-000002" in str(e.value)  # the message names the earlier checkpoint to fall back on


def test_nan_guard_skips_steps_then_stops_keeping_the_last_good_checkpoint(tmp_path):
    cfg = tiny_recipe(tmp_path, tiny_model("bert", head="mlm"), dict(kind="mlm", **IDS), steps=30,
                      checkpoint_every=4, max_bad_steps=3)
    trainer = Trainer(cfg)
    orig = trainer.train_step

    def poisoned():
        if trainer.step == 6:  # from step 6 on, every loss is NaN
            with torch.no_grad():
                trainer.model.encoder.embeddings.layer_norm.weight.fill_(math.nan)
        orig()

    trainer.train_step = poisoned
    result = trainer.fit()
    assert result.status == "diverged" and result.step == 9 and trainer.skipped == 3
    assert result.checkpoint.endswith("step-000004")
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-000004"]
    assert all(math.isfinite(r["loss"]) for r in read_metrics(tmp_path))


def test_flops_and_token_budgets(tmp_path):
    base = tiny_recipe(tmp_path / "s", tiny_model("bert", head="mlm"), dict(kind="mlm", **IDS), steps=4)
    per_step = pretrain(base).flops / 4
    cfg = base.replace(trainer=base.trainer.replace(run_dir=str(tmp_path / "f"), max_steps=None,
                                                    max_flops=10.5 * per_step))
    r = pretrain(cfg)
    assert r.step in (10, 11, 12) and r.flops >= 10.5 * per_step * 0.99
    cfg = base.replace(trainer=base.trainer.replace(run_dir=str(tmp_path / "t"), max_steps=None, max_tokens=8 * 16 * 5))
    assert pretrain(cfg).step == 5


def test_a_threads_file_changes_the_thread_count_mid_run(tmp_path, capsys):
    """The study gives freed cores to a running pretraining through its run directory's threads
    file: the trainer takes the count up at its next log step and records it; a malformed file
    is named and ignored (the run goes on)."""
    from encoderlab.threads import write_threads

    cfg = tiny_recipe(tmp_path / "a", tiny_model("bert", head="mlm"), dict(kind="mlm", **IDS), steps=10, log_every=5)
    write_threads(tmp_path / "a", 2)  # the fixture set 1
    capsys.readouterr()
    assert pretrain(cfg).status == "completed" and torch.get_num_threads() == 2
    runs = [r for r in read_metrics(tmp_path / "a", split="run") if "threads" in r]
    assert [(r["step"], r["threads"]) for r in runs] == [(5, 2)]  # changed once, at the first log step
    assert [r["threads"] for r in read_metrics(tmp_path / "a")] == [1, 2]  # each speed figure says its count
    torch.set_num_threads(1)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "threads").write_text("two\n")
    cfg = cfg.replace(trainer=cfg.trainer.replace(run_dir=str(tmp_path / "b")))
    assert pretrain(cfg).status == "completed" and torch.get_num_threads() == 1
    err = capsys.readouterr().err
    assert err.count("threads file ignored") == 1 and "threads: expected a positive integer" in err  # said once


def test_bf16_autocast_trains_like_fp32(tmp_path):
    final = {}
    for precision in ("bf16", "fp32"):
        cfg = tiny_recipe(tmp_path / precision, tiny_model("electra"), dict(kind="rtd", **IDS), steps=60, lr=1e-2,
                          precision=precision, repeat_one=True, log_every=10)
        pretrain(cfg)
        m = read_metrics(tmp_path / precision)
        assert all(r["precision"] == precision for r in m)
        assert m[-1]["gen_loss"] < m[0]["gen_loss"] - 0.4
        final[precision] = m[-1]["gen_loss"]
    assert abs(final["bf16"] - final["fp32"]) < 0.3, final
    weights = load_model(tmp_path / "bf16/checkpoints/step-000060").parameters()
    assert all(p.dtype == torch.float32 for p in weights)  # fp32 master weights


def test_continued_pretraining_from_a_checkpoint_and_tokenizer_check(tmp_path):
    src = tiny_recipe(tmp_path / "src", tiny_model("bert"), dict(kind="mlm", **IDS), steps=3, pairs=True)
    done = pretrain(src)
    cont = src.replace(model=src.model.replace(config=None), init=src.init.replace(checkpoint=done.checkpoint),
                       trainer=src.trainer.replace(run_dir=str(tmp_path / "cont")))
    t = Trainer(cont)
    ref = load_model(done.checkpoint).state_dict()
    for k, v in t.model.state_dict().items():
        assert torch.equal(v, ref[k]), k
    other = cont.replace(data=cont.data.replace(synthetic=cont.data.synthetic.replace(vocab_size=120)))
    with pytest.raises(ConfigError, match="allow_resize_embeddings"):
        Trainer(other)
    t = Trainer(other.replace(init=other.init.replace(allow_resize_embeddings=True)))
    emb = t.model.encoder.embeddings.word_embeddings.weight
    assert emb.shape[0] == 120 and torch.equal(emb[:99], ref["encoder.embeddings.word_embeddings.weight"])
    assert any("resized" in n for n in t.notes)


def test_continued_pretraining_from_transformers_electra_generator_and_discriminator(tmp_path):
    transformers = pytest.importorskip("transformers")
    common = dict(vocab_size=99, embedding_size=32, max_position_embeddings=64, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0)
    torch.manual_seed(1)
    transformers.ElectraForMaskedLM(transformers.ElectraConfig(
        hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=18, **common,
    )).save_pretrained(tmp_path / "gen")
    transformers.ElectraForPreTraining(transformers.ElectraConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37, **common,
    )).save_pretrained(tmp_path / "disc")
    cfg = tiny_recipe(tmp_path / "run", tiny_model("electra"), dict(kind="rtd", **IDS), steps=3)
    cfg = cfg.replace(model=cfg.model.replace(config=None, embedding_sharing="none"),
                      init=cfg.init.replace(generator=str(tmp_path / "gen"), discriminator=str(tmp_path / "disc")))
    trainer = Trainer(cfg)
    for net, src in ((trainer.model.generator, "gen"), (trainer.model.discriminator, "disc")):
        ref = load_model(tmp_path / src).state_dict()
        for k, v in net.state_dict().items():
            assert torch.equal(v, ref[k]), (src, k)
    assert trainer.model_cfg.generator.hidden_size == 16
    assert trainer.fit().status == "completed"
