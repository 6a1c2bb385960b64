"""The CPU dropout: its drop rate and expectation, and the attention path it brings."""

import pytest
import torch
import torch.nn.functional as F

from encoderlab.nn import encoder as encoder_module
from encoderlab.nn.config import EncoderConfig
from encoderlab.nn.dropout import Dropout, keep_mask
from encoderlab.nn.encoder import SelfAttention


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_drop_rate_and_expectation(p):
    torch.manual_seed(0)
    keep, scale = keep_mask(torch.Size([400, 1001]), p, torch.device("cpu"))  # odd size: a partial word
    assert abs(1 - keep.float().mean().item() - p) < 0.003
    x = torch.ones(400, 1001)
    y = Dropout(p).train()(x)
    assert abs(y.mean().item() - 1.0) < 0.01  # kept values are rescaled
    values = torch.unique(y).tolist()
    assert values[0] == 0.0 and values[1] == pytest.approx(scale) and len(values) == 2


def test_eval_mode_and_zero_rate_are_identity():
    x = torch.randn(4, 5)
    assert torch.equal(Dropout(0.1).eval()(x), x)
    assert torch.equal(Dropout(0.0).train()(x), x)


def test_same_seed_same_mask():
    torch.manual_seed(3)
    a = Dropout(0.1).train()(torch.ones(64, 64))
    torch.manual_seed(3)
    b = Dropout(0.1).train()(torch.ones(64, 64))
    assert torch.equal(a, b)


def test_cpu_attention_path_matches_sdpa():
    """With a drop rate that rounds to zero, the explicit CPU path (taken in training when the
    rate is > 0) must give SDPA's output, masks included."""
    cfg = EncoderConfig(vocab_size=50, hidden_size=32, num_layers=1, num_heads=4, intermediate_size=64,
                        hidden_dropout=0.0, attention_dropout=1e-9)
    torch.manual_seed(0)
    att = SelfAttention(cfg)
    x = torch.randn(3, 7, 32)
    mask = torch.ones(3, 7, dtype=torch.bool)
    mask[1, 5:] = False
    mask = mask[:, None, None, :]
    explicit = att.train()(x, mask)
    fused = att.eval()(x, mask)
    torch.testing.assert_close(explicit, fused, atol=1e-5, rtol=1e-5)


def test_bf16_cpu_attention_explicit_matches_sdpa(monkeypatch):
    """bf16 attention on the CPU runs as explicit products up to EXPLICIT_BF16_MAX_LEN where bf16
    products are fast (faster there); it must agree with SDPA's flash kernel, padded keys included,
    forward and backward."""
    cfg = EncoderConfig(vocab_size=50, hidden_size=64, num_layers=1, num_heads=4, intermediate_size=64,
                        hidden_dropout=0.0, attention_dropout=0.0)
    torch.manual_seed(0)
    att = SelfAttention(cfg).train()
    x = torch.randn(3, 9, 64)
    mask = torch.ones(3, 9, dtype=torch.bool)
    mask[2, 6:] = False
    mask = mask[:, None, None, :]
    w = torch.randn(3, 9, 64)  # a random readout, so the gradient through LayerNorm is not ~0
    outs = {}
    att.explicit_bf16 = True  # the explicit path, whatever this CPU is
    for limit in (256, 0):  # 0: every length is "long", so SDPA runs
        monkeypatch.setattr(encoder_module, "EXPLICIT_BF16_MAX_LEN", limit)
        att.zero_grad()
        xi = x.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = att(xi, mask)
        (y.float() * w).sum().backward()
        outs[limit] = (y.float(), xi.grad, att.qkv.weight.grad.clone())
    for explicit, sdpa in zip(outs[256], outs[0]):
        scale = sdpa.abs().max()
        assert scale > 0.1
        torch.testing.assert_close(explicit / scale, sdpa / scale, atol=2e-2, rtol=0)


def test_bf16_attention_path_follows_the_precision_probe(monkeypatch, tmp_path):
    """Where the probe says bf16 products are slow (an AVX2-only CPU), short bf16 attention keeps
    SDPA: the explicit products would be 3-5x slower there. Where fast, the explicit path runs. The
    choice is made by resolve_runtime before the forward pass and handed to the model: the forward
    pass itself never probes (it runs under no_grad here, as a pretraining's first evaluation)."""
    from encoderlab import precision
    from encoderlab.nn.encoder import Encoder
    from encoderlab.runtime import resolve_runtime

    calls = []
    monkeypatch.setattr(F, "scaled_dot_product_attention",
                        lambda *a, _f=F.scaled_dot_product_attention, **k: calls.append(1) or _f(*a, **k))
    cfg = EncoderConfig(vocab_size=50, hidden_size=64, num_layers=1, num_heads=4, intermediate_size=64,
                        hidden_dropout=0.0, attention_dropout=0.0)
    enc = Encoder(cfg).eval()
    ids = torch.randint(5, 50, (2, 9))
    for fast, sdpa_calls in ((False, 1), (True, 0)):
        monkeypatch.setattr(precision, "measure_cpu", lambda h, i, fast=fast: {
            "cpu": "Test CPU", "capability": "TEST", "fp32_gflops": 30.0, "bf16_gflops": 200.0 if fast else 1.0,
            "speedup": 6.0 if fast else 0.03, "rounds": 10,
            "bf16_fast": fast})
        monkeypatch.setenv("ENCODERLAB_CACHE_DIR", str(tmp_path / str(fast)))  # no cached verdict applies
        runtime = resolve_runtime("bf16", "cpu", cfg)  # asked for: the attention kernel still follows the probe
        assert runtime.attention == ("explicit" if fast else "sdpa")
        runtime.apply(enc)
        monkeypatch.setattr(precision, "measure_cpu", lambda *a: pytest.fail("the model probed"))
        calls.clear()
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            enc(ids)
        assert len(calls) == sdpa_calls


def test_the_recorded_attention_kernel_is_the_one_that_runs(monkeypatch):
    """Issue 50: a CPU run in fp32 with attention dropout recorded `attention: sdpa` while training ran
    the explicit products. The record now comes from the layers' own rule: each phase's kernel as run."""
    from encoderlab.nn.encoder import Encoder
    from encoderlab.runtime import resolve_runtime

    ran = []
    for name in ("sdpa", "explicit"):
        f = encoder_module.ATTENTION[name]
        monkeypatch.setitem(encoder_module.ATTENTION, name, lambda *a, _f=f, _n=name: ran.append(_n) or _f(*a))
    ids = torch.randint(5, 50, (2, 9))
    for dropout in (0.0, 0.1):
        cfg = EncoderConfig(vocab_size=50, hidden_size=32, num_layers=1, num_heads=4, intermediate_size=64,
                            hidden_dropout=0.0, attention_dropout=dropout)
        enc = Encoder(cfg)
        runtime = resolve_runtime("fp32", "cpu", cfg)
        runtime.apply(enc)
        ran.clear()
        enc.train()(ids)
        enc.eval()(ids)
        assert runtime.kernels() == {"training": ran[0], "inference": ran[1]}
        assert runtime.to_dict()["attention_kernels"]["training"] == ("explicit" if dropout else "sdpa")
