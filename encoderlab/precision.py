"""Which precision a run computes in: one rule for pretraining, fine-tuning, evaluation and studies.

``precision: auto | fp32 | bf16``. ``auto`` is bf16 autocast where this device runs bf16 matrix
products faster than fp32, and fp32 elsewhere. Machines differ by far more than a table of CPU names
could say: on a Zen 4 EPYC (AVX512-BF16) bf16 products ran 3.6x faster than fp32, on the same
machine limited to AVX2 80x *slower* (oneDNN then emulates them), and an AMX Xeon is reported 7-10x
faster (docs/benchmarks.md, "CPU kinds"). So on a CPU ``auto`` measures: a short probe times the
forward and backward of one encoder layer at the run's width and length 128, in fp32 and under bf16
autocast (casts included), round by round until the median ratio's 95% interval clears the threshold,
and picks bf16 only when that interval lies above it (measure_cpu). The verdict is cached per machine
(CPU model, capability, torch version, threads, shape) in ``$ENCODERLAB_CACHE_DIR`` or
``$XDG_CACHE_HOME/encoderlab`` (``~/.cache``), with its figures, so that later runs start at once;
a corrupt or foreign cache file is ignored with a warning and rewritten. The probe is asked once per
run, before any forward pass, by encoderlab/runtime.py, which also picks the attention kernel from
it: models never probe.

On CUDA ``auto`` is bf16 where the device supports it (compute capability >= 8.0), fp32 otherwise.
fp16 is not offered: it needs loss scaling, which the trainers do not implement.

Weights and optimizer states stay fp32 in every precision; bf16 is autocast of the matrix products.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import os
import platform
import statistics
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from encoderlab.nn.config import EncoderConfig
from encoderlab.nn.encoder import FeedForward, SelfAttention

PRECISIONS = ("auto", "fp32", "bf16")
# bf16 must beat fp32 by this factor in the probe, with the whole 95% interval of its median ratio
# above it: autocast's casts and bf16 element-wise work cost something the products' speed-up must
# pay for, and a ratio within noise of the threshold must give the same answer on every run.
MIN_BF16_SPEEDUP = 1.25
PROBE_LENGTH = 128  # the probe layer's sequence length, as the recipes train
PROBE_MAX_ROUNDS = 15  # rounds of (fp32, bf16) at most; at least 6 give an interval
CACHE_VERSION = 2  # 2: a layer's step, rounds and an interval (1 timed one linear layer)


class PrecisionError(ValueError):
    """A precision that is not one of PRECISIONS, or that this device cannot run."""


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision a run uses, what was asked for, and why (recorded in metrics and results)."""

    precision: str  # fp32 | bf16
    requested: str  # auto | fp32 | bf16
    reason: str
    probe: dict | None = None  # the CPU probe's record when auto measured (or found it cached)

    @property
    def bf16(self) -> bool:
        return self.precision == "bf16"

    @property
    def dtype(self) -> torch.dtype:
        return torch.bfloat16 if self.bf16 else torch.float32

    def to_dict(self) -> dict:
        return asdict(self)


def check_precision(value: str, where: str = "precision") -> str:
    if value not in PRECISIONS:
        raise PrecisionError(f"{where} must be one of {list(PRECISIONS)}, got {value!r}")
    return value


def resolve_precision(requested: str, device: torch.device | str = "cpu", *, hidden: int = 256,
                      intermediate: int | None = None) -> PrecisionChoice:
    """The precision to run in on ``device`` for a model of width ``hidden`` (feed-forward
    ``intermediate``, default 4x): explicit values are kept, ``auto`` is decided as the module says."""
    check_precision(requested)
    device = torch.device(device)
    if requested == "fp32":
        return PrecisionChoice("fp32", requested, "asked for")
    if requested == "bf16":
        if device.type == "cuda" and not cuda_bf16_supported(device):
            raise PrecisionError(f"precision=bf16 but {torch.cuda.get_device_name(device)} has no bf16 support; "
                                 "use precision=fp32 (or auto)")
        return PrecisionChoice("bf16", requested, "asked for")
    if device.type == "cuda":
        if cuda_bf16_supported(device):
            return PrecisionChoice("bf16", requested, f"auto: {torch.cuda.get_device_name(device)} supports bf16")
        return PrecisionChoice("fp32", requested, f"auto: {torch.cuda.get_device_name(device)} has no bf16 support")
    if device.type != "cpu":
        return PrecisionChoice("fp32", requested, f"auto: no bf16 rule for device type {device.type!r}")
    record = cpu_probe(hidden, intermediate or 4 * hidden)
    lo, hi = record["interval"]
    pick = "bf16" if record["bf16_fast"] else "fp32"
    reason = (f"auto: a layer's bf16 step {record['speedup']:.2f}x fp32 on this CPU (95% interval {lo:.2f}-{hi:.2f}, "
              f"{record['rounds']} rounds; {record['cpu']}, {record['capability']}; "
              f"fp32 {record['fp32_gflops']:.1f}, bf16 {record['bf16_gflops']:.1f} GFLOP/s; "
              f"bf16 needs the interval above {MIN_BF16_SPEEDUP}x)")
    return PrecisionChoice(pick, requested, reason, record)


def bf16_products_fast(hidden: int, intermediate: int | None = None) -> bool:
    """Whether this CPU runs a layer's step in bf16 clearly faster than in fp32 (the cached probe at
    width ``hidden``). Called while resolving a run's kernels (encoderlab/runtime.py), never by a model."""
    return bool(cpu_probe(hidden, intermediate or 4 * hidden)["bf16_fast"])


def cuda_bf16_supported(device: torch.device) -> bool:
    return torch.cuda.get_device_capability(device) >= (8, 0)


def autocast(precision: str | PrecisionChoice, device: torch.device | str):
    """bf16 autocast of the matrix products for bf16, nothing for fp32."""
    name = precision.precision if isinstance(precision, PrecisionChoice) else precision
    device = torch.device(device)
    if name == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    if name == "fp32":
        return contextlib.nullcontext()
    raise PrecisionError(f"autocast: resolve precision {name!r} first (resolve_precision)")


# ---- the CPU probe and its cache ----------------------------------------------------------------
def cpu_probe(hidden: int, intermediate: int) -> dict:
    """The cached probe record for this machine and shape, measured now when absent."""
    key = machine_key(hidden, intermediate)
    path = cache_path()
    entries = read_cache(path)
    record = entries.get(key)
    if record is not None:
        return dict(record, cached=True)
    record = measure_cpu(hidden, intermediate)
    entries[key] = record
    write_cache(path, entries)
    return dict(record, cached=False)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def probe_shape(hidden: int) -> tuple[int, int]:
    """(batch, length) of the probe's layer at width ``hidden``: length 128 as the recipes train,
    the batch shrunk with the width so that the slow case (bf16 emulated, ~1 GFLOP/s) stays near a
    second: 4 rows of 128 up to width 256, 1 from 512."""
    return max(1, min(4, round(4 * (256 / hidden) ** 2))), PROBE_LENGTH


def machine_key(hidden: int, intermediate: int) -> str:
    B, T = probe_shape(hidden)
    return (f"{cpu_model()}|{torch.backends.cpu.get_cpu_capability()}|torch {torch.__version__}|"
            f"threads {torch.get_num_threads()}|layer {B}x{T}x{hidden}x{intermediate}")


def median_interval(values: list[float]) -> tuple[float, float] | None:
    """A distribution-free interval of at least 95% for the median of ``values`` (order statistics
    k and n-k+1, k the largest with P(Binomial(n, 1/2) < k) <= 2.5%); None below 6 values, where
    even the minimum and maximum cover less than 95%."""
    n, xs = len(values), sorted(values)
    k, below = 0, 0.0
    while True:
        below_next = below + math.comb(n, k) / 2 ** n  # P(Binomial < k + 1)
        if below_next > 0.025:
            break
        below, k = below_next, k + 1
    return (xs[k - 1], xs[n - k]) if k >= 1 else None


def measure_cpu(hidden: int, intermediate: int) -> dict:
    """Time the forward and backward of one encoder layer (attention and feed-forward) at width
    ``hidden``, in fp32 (SDPA attention) and under bf16 autocast (explicit attention products, what
    a bf16 run would use), alternated round by round so that a burst of other work slows both
    arms of a round rather than all of one. Each round gives a ratio (fp32 time / bf16 time); the
    probe stops once the median ratio's 95% interval lies wholly above or below MIN_BF16_SPEEDUP, or
    after PROBE_MAX_ROUNDS, and bf16 is chosen only when the interval is wholly above it: a machine
    whose ratio sits within noise of the threshold gets fp32 on every run, not a coin toss. A round
    in which bf16 is more than 4x slower (bf16 emulated, an AVX2 CPU) ends the probe at once.

    Runs with gradients on whatever its caller's context (no_grad, inference mode): it measures a
    training step."""
    B, T = probe_shape(hidden)
    cfg = EncoderConfig(vocab_size=8, hidden_size=hidden, num_layers=1, num_heads=max(1, hidden // 64),
                        intermediate_size=intermediate, max_position_embeddings=T,
                        hidden_dropout=0.0, attention_dropout=0.0)
    with torch.inference_mode(False), torch.enable_grad():
        g = torch.Generator().manual_seed(0)
        attention, ffn = SelfAttention(cfg), FeedForward(cfg)
        x = torch.randn(B, T, hidden, generator=g).requires_grad_()

        def step(bf16: bool) -> float:
            attention.explicit_bf16 = bf16
            t = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                y = ffn(attention(x))
            y.float().sum().backward()
            return time.perf_counter() - t

        step(False), step(True)  # warm-up: first calls pick kernels and allocate
        fp32, bf16, ratios, interval = [], [], [], None
        for _ in range(PROBE_MAX_ROUNDS):
            fp32.append(step(False))
            bf16.append(step(True))
            ratios.append(fp32[-1] / bf16[-1])
            if ratios[-1] < 0.25:  # emulated bf16: no need for an interval
                interval = (min(ratios), max(ratios))
                break
            interval = median_interval(ratios)
            if interval is not None and (interval[0] >= MIN_BF16_SPEEDUP or interval[1] < MIN_BF16_SPEEDUP):
                break
    # 3 products (forward, two backward) of each linear, and 2 x 2 of attention's (B, N, T, T) ones.
    flops = 3 * 2 * B * T * hidden * (3 * hidden + hidden + 2 * intermediate) + 3 * 2 * 2 * B * T * T * hidden
    speedup = statistics.median(ratios)
    fast = interval is not None and interval[0] >= MIN_BF16_SPEEDUP
    return {"cpu": cpu_model(), "capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__,
            "threads": torch.get_num_threads(), "shape": [B, T, hidden, intermediate],
            "fp32_gflops": flops / min(fp32) / 1e9, "bf16_gflops": flops / min(bf16) / 1e9,
            "speedup": speedup, "interval": list(interval) if interval else [speedup, speedup],
            "rounds": len(ratios), "bf16_fast": fast,
            "date": datetime.datetime.now().isoformat(timespec="seconds")}


def cache_path() -> Path:
    root = os.environ.get("ENCODERLAB_CACHE_DIR")
    if not root:
        root = str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "encoderlab")
    return Path(root) / "precision-probe.json"


_RECORD_KEYS = {"cpu": str, "capability": str, "fp32_gflops": float, "bf16_gflops": float, "speedup": float,
                "interval": list, "rounds": int, "bf16_fast": bool}


def read_cache(path: Path) -> dict[str, dict]:
    """The probe records in ``path``; a missing file is empty, an unreadable, corrupt or foreign
    one (another program's, another version's) is ignored with a warning, never a crash."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        warnings.warn(f"{path}: unreadable precision-probe cache ignored ({e}); the probe runs again", stacklevel=3)
        return {}
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION or not isinstance(data.get("entries"), dict):
        warnings.warn(f"{path}: not an encoderlab precision-probe cache of version {CACHE_VERSION}; ignored "
                      "(the probe runs again and rewrites it)", stacklevel=3)
        return {}
    good = {}
    for key, rec in data["entries"].items():
        if isinstance(rec, dict) and all(isinstance(rec.get(k), t) for k, t in _RECORD_KEYS.items()) \
                and rec["fp32_gflops"] > 0 and rec["bf16_gflops"] > 0:
            good[key] = rec
        else:
            warnings.warn(f"{path}: malformed probe record {key!r} ignored", stacklevel=3)
    return good


def write_cache(path: Path, entries: dict[str, dict]) -> None:
    """Atomic (temporary file, then rename), so a killed run never leaves half a cache; a cache
    directory that cannot be written costs only the probe's time on the next run."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"version": CACHE_VERSION, "entries": entries}, indent=1))
        os.replace(tmp, path)
    except OSError as e:
        warnings.warn(f"{path}: could not write the precision-probe cache ({e})", stacklevel=3)
