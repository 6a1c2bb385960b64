"""Shared benchmark helpers: machine description, timing, and the measured matrix-product peak."""

from __future__ import annotations

import datetime
import os
import platform
import resource
import subprocess
import time

import torch


def machine(device: str = "cpu") -> dict:
    cpu = "unknown"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        cpu = next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except (OSError, StopIteration):
        pass
    import importlib.metadata as md

    versions = {"torch": torch.__version__, "python": platform.python_version()}
    for pkg in ("transformers", "onnxruntime", "tokenizers"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    gpu = {"gpu": torch.cuda.get_device_name(device)} if device.startswith("cuda") else {}
    # The kernels' instruction set as torch sees it, and any limit set on it: a run with
    # ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 stands for an AVX2-only CPU and says so.
    limits = {k: os.environ[k] for k in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA") if os.environ.get(k)}
    return {"cpu": cpu, "capability": torch.backends.cpu.get_cpu_capability(), **({"isa_limits": limits} if limits
            else {}), **gpu, "threads": torch.get_num_threads(), "date": datetime.date.today().isoformat(), **versions}


def auto_precision(device: str = "cpu", hidden: int = 256, intermediate: int = 1024):
    """What ``precision: auto`` resolves to here for a model of this width (encoderlab/precision.py)."""
    from encoderlab.precision import resolve_precision

    return resolve_precision("auto", torch.device(device), hidden=hidden, intermediate=intermediate)


def synced(fn, device: str):
    """fn, followed by a wait for the device's queued kernels, so that a timer sees the work done:
    CUDA calls return as soon as their kernels are queued."""
    if not device.startswith("cuda"):
        return fn

    def call():
        out = fn()
        torch.cuda.synchronize(device)
        return out

    return call


def timeit(fn, *, warmup: int = 2, min_time: float = 3.0, max_iters: int = 1000) -> float:
    """Median seconds per call over at least min_time seconds of calls (after warm-up)."""
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    while (time.perf_counter() - start < min_time or len(times) < 3) and len(times) < max_iters:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2]


def matmul_peak(dtype: torch.dtype, n: int = 2048, seconds: float = 2.0, device: str = "cpu") -> float:
    """Dense matrix-product FLOP/s for (n, n) x (n, n) in dtype on this machine, measured now
    (n = 8192 on a GPU, where 2048 is too small to fill it)."""
    if device.startswith("cuda"):
        n = max(n, 8192)
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    t = timeit(synced(lambda: a @ b, device), min_time=seconds)
    return 2 * n**3 / t


def peak_rss_mb() -> float:
    """Peak resident memory of this process (VmHWM, resettable through /proc/self/clear_refs)."""
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
