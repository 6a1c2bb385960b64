"""Which precision a run computes in: one rule for pretraining, fine-tuning, evaluation and studies.

``precision: auto | fp32 | bf16``. ``auto`` is bf16 autocast where this device runs bf16 matrix
products faster than fp32, and fp32 elsewhere. Machines differ by far more than a table of CPU names
could say: on a Zen 4 EPYC (AVX512-BF16) bf16 products ran 3.6x faster than fp32, on the same
machine limited to AVX2 80x *slower* (oneDNN then emulates them), and an AMX Xeon is reported 7-10x
faster (docs/benchmarks.md, "CPU kinds"). So on a CPU ``auto`` measures: a short probe times the
forward and backward of one encoder layer at the run's width and length 128, in fp32 and under bf16
autocast (casts included), over a few alternated rounds, and picks bf16 only when the fastest calls'
ratio clears the threshold by a margin (measure_cpu). The verdict is cached per machine
(CPU model, capability, torch version, shape) in ``$ENCODERLAB_CACHE_DIR`` or
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
# bf16 is chosen where a layer's step (autocast's casts and bf16 element-wise work included) runs
# faster than in fp32, and the probe's reading must clear that break-even by PROBE_MARGIN: within the
# margin fp32 (exact) is kept, so that a machine near it gets the same answer on every fresh run. The
# first probe (one linear layer, which underweights the casts) needed 1.25x; a layer's step needs no
# such allowance. Measured ratios (docs/benchmarks.md, "CPU kinds"): 1.27-1.89 on a Zen 4 at widths
# 128-768 under load, 0.03-0.1 limited to AVX2, 0.8 at width 32.
MIN_BF16_SPEEDUP = 1.0
PROBE_MARGIN = 0.15
PROBE_LENGTH = 128  # the probe layer's sequence length, as the recipes train
PROBE_ROUNDS = 10  # rounds of (fp32, bf16): 0.2-1 s at widths 128-768 where bf16 is fast
PROBE_MAX_ROUNDS = 30  # while the calls' times still scatter (a busy machine), up to this many
CACHE_VERSION = 2  # 2: a layer's step over rounds (1 timed one linear layer)


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
    pick = "bf16" if record["bf16_fast"] else "fp32"
    reason = (f"auto: a layer's bf16 step {record['speedup']:.2f}x fp32 on this CPU (best of {record['rounds']} "
              f"rounds; {record['cpu']}, {record['capability']}; fp32 {record['fp32_gflops']:.1f}, "
              f"bf16 {record['bf16_gflops']:.1f} GFLOP/s; bf16 needs >= {MIN_BF16_SPEEDUP}x with a "
              f"{PROBE_MARGIN:.0%} margin, {MIN_BF16_SPEEDUP * (1 + PROBE_MARGIN):.3g}x)")
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


def machine_kind(device: torch.device | str = "cpu") -> str:
    """The kind of machine a run computes on, as the studies compare it: the CPU's model and the
    kernels torch dispatches to (two Zen 4 or two AMX Xeons are one kind; the same CPU run with
    ATEN_CPU_CAPABILITY=avx2 is another), or the GPU's name."""
    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    if device.type != "cpu":
        return device.type
    return f"{cpu_model()} / {torch.backends.cpu.get_cpu_capability()}"


def probe_shape(hidden: int) -> tuple[int, int]:
    """(batch, length) of the probe's layer at width ``hidden``: length 128 as the recipes train,
    the batch shrunk with the width so that the slow case (bf16 emulated, ~1 GFLOP/s) stays near a
    second: 4 rows of 128 up to width 256, 1 from 512."""
    return max(1, min(4, round(4 * (256 / hidden) ** 2))), PROBE_LENGTH


def machine_key(hidden: int, intermediate: int) -> str:
    B, T = probe_shape(hidden)
    return (f"{cpu_model()}|{torch.backends.cpu.get_cpu_capability()}|torch {torch.__version__}|"
            f"1 thread|layer {B}x{T}x{hidden}x{intermediate}")


def _scattered(times: list[float]) -> bool:
    """Whether a precision's calls still scatter (the median more than 1.5x the fastest): other work
    was slowing them, and more rounds bring the fastest closer to the machine's own speed."""
    return statistics.median(times) > 1.5 * min(times)


def measure_cpu(hidden: int, intermediate: int) -> dict:
    """Time the forward and backward of one encoder layer (attention and feed-forward) at width
    ``hidden``, in fp32 (SDPA attention) and under bf16 autocast (explicit attention products, what
    a bf16 run would use), alternated over PROBE_ROUNDS rounds, more (up to PROBE_MAX_ROUNDS) while
    either precision's calls still scatter. The speed-up is the ratio of the two precisions' fastest
    calls: other work on the machine only ever slows a call down, so the minimum is the least
    disturbed reading (as timeit's), where a median of per-round ratios moved with the load (20
    probes on a busy 2-core Zen 4 read 1.20 at width 128; idle, 1.5-1.7). On one thread, whatever
    the run's count: whether bf16 products are fast is a property of each core's instructions, and
    one thread keeps the reading clear of OpenMP's barriers, which on a busy machine made some
    2-thread probes read bf16 30x slower than fp32 on a Zen 4 that runs it 1.5x faster.
    bf16 is chosen when the speed-up clears MIN_BF16_SPEEDUP by PROBE_MARGIN: a machine whose
    ratio sits near the threshold gets fp32 on every run, not a coin toss. Three rounds in which bf16
    is more than 4x slower (bf16 emulated, an AVX2 CPU) end the probe early.

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

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            step(False), step(True)  # warm-up: first calls pick kernels and allocate
            fp32, bf16 = [], []
            while len(fp32) < PROBE_MAX_ROUNDS and (len(fp32) < PROBE_ROUNDS or _scattered(fp32) or _scattered(bf16)):
                fp32.append(step(False))
                bf16.append(step(True))
                if len(fp32) >= 3 and min(fp32) < 0.25 * min(bf16):  # emulated bf16: the verdict is plain
                    break
        finally:
            torch.set_num_threads(threads)
    # 3 products (forward, two backward) of each linear, and 2 x 2 of attention's (B, N, T, T) ones.
    flops = 3 * 2 * B * T * hidden * (3 * hidden + hidden + 2 * intermediate) + 3 * 2 * 2 * B * T * T * hidden
    speedup = min(fp32) / min(bf16)
    return {"cpu": cpu_model(), "capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__,
            "threads": 1, "shape": [B, T, hidden, intermediate],
            "fp32_gflops": flops / min(fp32) / 1e9, "bf16_gflops": flops / min(bf16) / 1e9,
            "speedup": speedup, "median_round_ratio": statistics.median(a / b for a, b in zip(fp32, bf16)),
            "rounds": len(fp32), "bf16_fast": speedup >= MIN_BF16_SPEEDUP * (1 + PROBE_MARGIN),
            "date": datetime.datetime.now().isoformat(timespec="seconds")}


def cache_root() -> Path:
    """encoderlab's cache folder: $ENCODERLAB_CACHE_DIR, else $XDG_CACHE_HOME/encoderlab or ~/.cache/encoderlab."""
    root = os.environ.get("ENCODERLAB_CACHE_DIR")
    if not root:
        root = str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "encoderlab")
    return Path(root)


def cache_path() -> Path:
    return cache_root() / "precision-probe.json"


_RECORD_KEYS = {"cpu": str, "capability": str, "fp32_gflops": float, "bf16_gflops": float, "speedup": float,
                "rounds": int, "bf16_fast": bool}


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
