"""Which precision a run computes in: one rule for pretraining, fine-tuning, evaluation and studies.

``precision: auto | fp32 | bf16``. ``auto`` is bf16 autocast where this device runs bf16 matrix
products faster than fp32, and fp32 elsewhere. Machines differ by far more than a table of CPU names
could say: on a Zen 4 EPYC (AVX512-BF16) bf16 products ran 3.6x faster than fp32, on the same
machine limited to AVX2 80x *slower* (oneDNN then emulates them), and an AMX Xeon is reported 7-10x
faster (docs/benchmarks.md, "CPU kinds"). So on a CPU ``auto`` measures: a short probe times the
forward and backward of one linear layer at the run's width, in fp32 and under bf16 autocast (casts
included), and picks bf16 only when it is clearly faster. The verdict is cached per machine (CPU
model, capability, torch version, threads, shape) in ``$ENCODERLAB_CACHE_DIR`` or
``$XDG_CACHE_HOME/encoderlab`` (``~/.cache``), with both figures, so that later runs start at once;
a corrupt or foreign cache file is ignored with a warning and rewritten.

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
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

PRECISIONS = ("auto", "fp32", "bf16")
# bf16 must beat fp32 by this factor in the probe: autocast adds casts and bf16 element-wise work
# that the probe's single layer underweights, so a near tie is resolved to the exact precision.
MIN_BF16_SPEEDUP = 1.25
PROBE_ROWS = 256  # tokens per probe product: large enough to use the matrix units, small enough
# that the slow case (bf16 emulated on AVX2, ~1 GFLOP/s) costs well under a second.
CACHE_VERSION = 1


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
    speedup = record["bf16_gflops"] / max(record["fp32_gflops"], 1e-9)
    pick = "bf16" if speedup >= MIN_BF16_SPEEDUP else "fp32"
    reason = (f"auto: bf16 products {speedup:.2f}x fp32 on this CPU ({record['cpu']}, {record['capability']}; "
              f"fp32 {record['fp32_gflops']:.1f}, bf16 {record['bf16_gflops']:.1f} GFLOP/s; "
              f"bf16 needs >= {MIN_BF16_SPEEDUP}x)")
    return PrecisionChoice(pick, requested, reason, record)


def resolve_for_encoder(requested: str, device: torch.device | str, encoder) -> PrecisionChoice:
    """resolve_precision at the width of ``encoder`` (an EncoderConfig): what every caller probes."""
    return resolve_precision(requested, device, hidden=encoder.hidden_size, intermediate=encoder.intermediate_size)


def bf16_products_fast(hidden: int = 256) -> bool:
    """Whether this CPU runs bf16 matrix products at least MIN_BF16_SPEEDUP x faster than fp32 (the
    cached probe at width ``hidden``): kernels with a bf16-only fast path ask this."""
    record = cpu_probe(hidden, 4 * hidden)
    return record["bf16_gflops"] >= MIN_BF16_SPEEDUP * record["fp32_gflops"]


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


def machine_key(hidden: int, intermediate: int) -> str:
    return (f"{cpu_model()}|{torch.backends.cpu.get_cpu_capability()}|torch {torch.__version__}|"
            f"threads {torch.get_num_threads()}|{PROBE_ROWS}x{hidden}x{intermediate}")


def measure_cpu(hidden: int, intermediate: int, reps: int = 5) -> dict:
    """GFLOP/s of a linear layer's forward and backward (3 products) in fp32 and under bf16
    autocast: the best of ``reps`` calls each, the two precisions alternated, so that a burst of other
    work on the machine slows calls of both rather than all of one (a probe that timed its fp32 calls
    first read fp32 at 4 GFLOP/s instead of 140 under such a burst). Where bf16 is more than 4x slower
    after two rounds the verdict is plain, and the remaining rounds (a second or more each on an
    AVX2 CPU at width 768) are skipped."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(PROBE_ROWS, hidden, generator=g, requires_grad=True)
    layer = torch.nn.Linear(hidden, intermediate)
    flops = 3 * 2 * PROBE_ROWS * hidden * intermediate

    def step(bf16: bool) -> float:
        t = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            y = layer(x)
        y.float().sum().backward()
        return time.perf_counter() - t

    step(False), step(True)  # warm-up: first calls pick kernels and allocate
    fp32, bf16 = [], []
    for i in range(reps):
        fp32.append(step(False))
        bf16.append(step(True))
        if i >= 1 and min(bf16) > 4 * min(fp32):
            break
    return {"cpu": cpu_model(), "capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__,
            "threads": torch.get_num_threads(), "shape": [PROBE_ROWS, hidden, intermediate],
            "fp32_gflops": flops / min(fp32) / 1e9, "bf16_gflops": flops / min(bf16) / 1e9,
            "date": datetime.datetime.now().isoformat(timespec="seconds")}


def cache_path() -> Path:
    root = os.environ.get("ENCODERLAB_CACHE_DIR")
    if not root:
        root = str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "encoderlab")
    return Path(root) / "precision-probe.json"


_RECORD_KEYS = {"cpu": str, "capability": str, "fp32_gflops": float, "bf16_gflops": float}


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
