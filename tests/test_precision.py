"""precision: auto | fp32 | bf16, resolved per machine: the probe's verdict both ways, a fake CUDA
capability, the cache (corrupt and foreign files ignored with a warning), the old ``bf16`` keys, and
a pretraining run whose probe says bf16 is slow trains in fp32 and records it."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from encoderlab import precision as P
from encoderlab.config import ConfigError, ConfigNote
from encoderlab.eval.config import FinetuneConfig
from encoderlab.study.config import StudyConfig
from encoderlab.train import pretrain
from encoderlab.train.config import TrainerConfig
from tests.pretrain_helpers import read_metrics, tiny_model, tiny_recipe

IDS = dict(mask_token_id=3, special_token_ids=(0, 1, 2, 3, 4))


def _record(fp32: float, bf16: float) -> dict:
    r = bf16 / fp32
    return {"cpu": "Test CPU", "capability": "TEST", "torch": torch.__version__, "threads": 1,
            "shape": [4, 128, 32, 128], "fp32_gflops": fp32, "bf16_gflops": bf16, "speedup": r,
            "rounds": 10, "bf16_fast": r >= P.MIN_BF16_SPEEDUP * (1 + P.PROBE_MARGIN),
            "date": "2026-12-04"}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "precision-probe.json"


@pytest.fixture
def probe(monkeypatch, cache):
    """measure_cpu replaced by a fixed record; calls counted."""
    calls = []

    def set_speeds(fp32: float, bf16: float):
        monkeypatch.setattr(P, "measure_cpu", lambda h, i: calls.append((h, i)) or _record(fp32, bf16))
        return calls
    return set_speeds


@pytest.mark.parametrize("fp32,bf16,want", [(30.0, 200.0, "bf16"), (30.0, 0.9, "fp32"), (30.0, 33.0, "fp32")])
def test_auto_on_cpu_follows_the_probe(probe, fp32, bf16, want):
    probe(fp32, bf16)
    choice = P.resolve_precision("auto", "cpu", hidden=32, intermediate=128)
    assert choice.precision == want and choice.requested == "auto"
    assert f"{bf16 / fp32:.2f}x" in choice.reason and "Test CPU" in choice.reason
    assert choice.probe["fp32_gflops"] == fp32 and choice.dtype == (torch.bfloat16 if want == "bf16" else torch.float32)


def test_explicit_precisions_are_kept_and_unknown_ones_refused(probe):
    calls = probe(30.0, 0.9)
    assert P.resolve_precision("bf16", "cpu").precision == "bf16"  # asked for, even where slow
    assert P.resolve_precision("fp32", "cpu").precision == "fp32"
    assert calls == []  # no probe for an explicit choice
    with pytest.raises(P.PrecisionError, match="fp16"):
        P.resolve_precision("fp16", "cpu")


def test_auto_on_cuda_follows_the_device_capability(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "Fake GPU")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (8, 0))
    assert P.resolve_precision("auto", torch.device("cuda")).precision == "bf16"
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (7, 5))
    choice = P.resolve_precision("auto", torch.device("cuda"))
    assert choice.precision == "fp32" and "no bf16" in choice.reason
    with pytest.raises(P.PrecisionError, match="Fake GPU has no bf16"):
        P.resolve_precision("bf16", torch.device("cuda"))


def test_the_probe_is_cached_per_machine_and_shape(probe, cache):
    calls = probe(30.0, 200.0)
    first = P.resolve_precision("auto", "cpu", hidden=32, intermediate=128)
    again = P.resolve_precision("auto", "cpu", hidden=32, intermediate=128)
    assert len(calls) == 1 and first.probe["cached"] is False and again.probe["cached"] is True
    P.resolve_precision("auto", "cpu", hidden=64, intermediate=256)  # another shape: measured
    assert len(calls) == 2
    entries = json.loads(cache.read_text())["entries"]
    assert len(entries) == 2 and all(torch.backends.cpu.get_cpu_capability() in k for k in entries)


@pytest.mark.parametrize("content", [b"{not json", b"\xff\xfe\x00garbage", b"[1, 2, 3]",
                                     b'{"version": 99, "entries": {}}',
                                     b'{"version": 1, "entries": {"k": {"cpu": 3}}}'])
def test_corrupt_or_foreign_cache_is_ignored_with_a_warning_and_rewritten(probe, cache, content):
    cache.parent.mkdir(parents=True)
    cache.write_bytes(content)
    calls = probe(30.0, 0.9)
    with pytest.warns(UserWarning, match="precision-probe"):
        choice = P.resolve_precision("auto", "cpu", hidden=32, intermediate=128)
    assert choice.precision == "fp32" and len(calls) == 1
    assert json.loads(cache.read_text())["version"] == P.CACHE_VERSION  # rewritten, usable next time
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        P.resolve_precision("auto", "cpu", hidden=32, intermediate=128)
    assert len(calls) == 1


def test_an_unwritable_cache_costs_only_a_warning(probe, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("ENCODERLAB_CACHE_DIR", str(blocker / "sub"))  # a directory under a file
    probe(30.0, 200.0)
    with pytest.warns(UserWarning, match="could not write"):
        assert P.resolve_precision("auto", "cpu", hidden=32, intermediate=128).precision == "bf16"


def test_the_real_probe_measures_both_precisions(cache):
    rec = P.measure_cpu(32, 64)
    assert rec["fp32_gflops"] > 0 and rec["bf16_gflops"] > 0
    assert rec["capability"] == torch.backends.cpu.get_cpu_capability() and rec["shape"] == [4, 128, 32, 64]
    assert rec["speedup"] == pytest.approx(rec["bf16_gflops"] / rec["fp32_gflops"])
    # PROBE_ROUNDS at least, more (to PROBE_MAX_ROUNDS) while calls scatter, as under two test workers;
    # fewer only where emulated bf16 ended the probe (fp32 more than 4x faster)
    assert 3 <= rec["rounds"] <= P.PROBE_MAX_ROUNDS
    assert rec["rounds"] >= P.PROBE_ROUNDS or rec["speedup"] < 0.25
    assert rec["bf16_fast"] == (rec["speedup"] >= P.MIN_BF16_SPEEDUP * (1 + P.PROBE_MARGIN))


@pytest.mark.parametrize("context", [torch.no_grad, torch.inference_mode])
def test_the_probe_measures_a_training_step_whatever_the_callers_context(cache, context):
    """The fresh-machine crash: the first evaluation of a pretraining (under no_grad) reached the
    probe, whose backward then failed. The probe enables gradients itself."""
    with context():
        rec = P.measure_cpu(32, 64)
    assert rec["fp32_gflops"] > 0 and rec["bf16_gflops"] > 0


def _timed_probe(monkeypatch, bf16_times):
    """measure_cpu on a fake clock: every fp32 step takes 1.0, the bf16 steps take bf16_times in turn."""
    clock = {"t": 0.0}
    times = iter(bf16_times)
    monkeypatch.setattr(P.time, "perf_counter", lambda: clock["t"])
    real_forward = P.FeedForward.forward

    def timed_forward(self, x):
        clock["t"] += next(times) if torch.is_autocast_enabled("cpu") else 1.0
        return real_forward(self, x)

    monkeypatch.setattr(P.FeedForward, "forward", timed_forward)
    return P.measure_cpu(32, 64)


@pytest.mark.parametrize("ratio,fast", [(1.5, True), (1.1, False), (0.9, False)])
def test_a_ratio_within_the_margin_of_the_threshold_keeps_fp32(monkeypatch, ratio, fast):
    """1.1x is faster, but not by the margin (1.15x): fp32, the same on every run, not whichever side
    of break-even one reading fell on."""
    rec = _timed_probe(monkeypatch, [1 / ratio] * (P.PROBE_ROUNDS + 1))
    assert rec["speedup"] == pytest.approx(ratio) and rec["bf16_fast"] is fast and rec["rounds"] == P.PROBE_ROUNDS


def test_a_burst_of_other_work_neither_flips_the_verdict_nor_ends_the_probe(monkeypatch):
    """One bf16 call 20x slower (the machine busy for a moment) is not an emulated bf16: the fastest
    calls decide, and the probe runs all its rounds."""
    rec = _timed_probe(monkeypatch, [0.6, 20.0] + [0.6] * P.PROBE_ROUNDS)
    assert rec["bf16_fast"] is True and rec["rounds"] == P.PROBE_ROUNDS


def test_scattered_calls_get_more_rounds_and_the_probe_runs_on_one_thread(monkeypatch):
    """Every other bf16 call slowed 3x (a busy machine): the median stays far from the fastest, so
    the probe goes on to PROBE_MAX_ROUNDS; and it measures on one thread, the caller's count restored."""
    seen = []
    monkeypatch.setattr(P.SelfAttention, "forward", lambda self, x, *a, _f=P.SelfAttention.forward, **k:
                        seen.append(torch.get_num_threads()) or _f(self, x, *a, **k))
    torch.set_num_threads(2)
    rec = _timed_probe(monkeypatch, [0.6, 1.8] * P.PROBE_MAX_ROUNDS)
    assert rec["rounds"] == P.PROBE_MAX_ROUNDS and rec["bf16_fast"] is True
    assert set(seen) == {1} and torch.get_num_threads() == 2


def test_emulated_bf16_ends_the_probe_after_three_rounds(monkeypatch):
    rec = _timed_probe(monkeypatch, [30.0] * (P.PROBE_ROUNDS + 1))
    assert rec["rounds"] == 3 and rec["bf16_fast"] is False and rec["speedup"] == pytest.approx(1 / 30)


@pytest.mark.parametrize("fp32,bf16,want", [(30.0, 0.9, "fp32"), (30.0, 200.0, "bf16")])
def test_auto_pretraining_runs_in_the_probed_precision_and_records_why(tmp_path, probe, fp32, bf16, want):
    probe(fp32, bf16)
    cfg = tiny_recipe(tmp_path, tiny_model("bert"), dict(kind="mlm", sentence_loss=False, **IDS), steps=4,
                      precision="auto", log_every=2)
    res = pretrain(cfg)
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    run = [r for r in lines if r["split"] == "run"]
    assert len(run) == 1 and run[0]["precision"] == want and run[0]["requested"] == "auto"
    assert "bf16 step" in run[0]["reason"] and run[0]["probe"]["bf16_gflops"] == bf16
    assert run[0]["attention"] == ("explicit" if want == "bf16" else "sdpa")  # decided with the precision
    assert run[0]["machine"] == P.machine_kind("cpu")  # the kind of machine, for the studies (issue 32)
    assert all(r["precision"] == want for r in read_metrics(tmp_path))
    assert res.status == "completed"


def test_old_bf16_keys_still_load_with_a_note_naming_precision():
    with pytest.warns(ConfigNote, match="read as precision: auto"):
        assert TrainerConfig.from_dict({"bf16": True, "max_steps": 1}).precision == "auto"
    with pytest.warns(ConfigNote, match="precision"):
        assert FinetuneConfig.from_dict({"bf16": False}).precision == "fp32"
    with pytest.warns(ConfigNote):
        assert StudyConfig.from_dict({"bf16": False}).base.trainer.precision == "fp32"
    with pytest.raises(ConfigError, match="keep only 'precision'"):
        TrainerConfig.from_dict({"bf16": True, "precision": "fp32", "max_steps": 1})
    with pytest.raises(ConfigError, match="precision: auto\\|fp32\\|bf16"):
        TrainerConfig.from_dict({"bf16": "yes", "max_steps": 1})
    with pytest.raises(ConfigError, match="not one of"):
        TrainerConfig.from_dict({"precision": "fp16", "max_steps": 1})


def test_old_bf16_override_maps_to_precision():
    cfg = tiny_recipe("runs/unused", tiny_model("bert"), dict(kind="mlm", **IDS))
    with pytest.warns(ConfigNote, match="trainer.precision=fp32"):
        assert cfg.with_overrides(["trainer.bf16=false"]).trainer.precision == "fp32"
    assert cfg.with_overrides(["trainer.precision=bf16"]).trainer.precision == "bf16"
    with pytest.warns(ConfigNote):
        assert FinetuneConfig().with_overrides(["bf16=true"]).precision == "auto"
