"""Pretraining step throughput: encoderlab's trainer step against the transformers-built step of
benchmarks/hf_reference.py, alternated in one run on the same token ids, fp32 and bf16 autocast.

    python benchmarks/train_step.py [--models electra-small,bert-small,albert-base] [--batch 32]
        [--seq 128] [--seconds 20] [--dtypes fp32,bf16] [--json out.json] [--profile] [--compile]
        [--device cuda]

It prints the CPU model and kernel capability first, and for each model what ``precision: auto``
resolves to here, then encoderlab in auto against the reference in *its* best precision on this
machine (the faster of the dtypes timed in this run; on an AVX2-only CPU, where bf16 is ~37x slower,
time ``--dtypes fp32`` and the auto row still follows).

For each model and dtype: tokens/s of both steps and their ratio; encoderlab's model FLOPs
utilization (the analytic training FLOPs of a step, forward + 2x backward, per second, over the
dense matrix-product peak measured in the same run for that dtype); peak memory of each step in a
fresh subprocess that builds only that implementation (on a CPU: VmHWM after a few steps, minus the
process's RSS before building; with ``--device cuda``: the CUDA allocator's peak).
``--profile`` prints encoderlab's step by operator (self CPU time), to show where the time goes.

encoderlab's step is ``Trainer.train_step``: masking, the objective (sparse MLM head, sampling),
backward, gradient clipping and AdamW, with the trainer's bookkeeping. The reference step has no
clipping; both use AdamW at the same learning rate and 15% masking.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import auto_precision, machine, matmul_peak, peak_rss_mb, synced, timeit  # noqa: E402
from hf_reference import hf_step_fn  # noqa: E402

from encoderlab.models.presets import preset  # noqa: E402
from encoderlab.objectives import ObjectiveConfig  # noqa: E402
from encoderlab.train import DataConfig, ModelSpec, OptimizerConfig, PretrainConfig, TrainerConfig  # noqa: E402
from encoderlab.train.config import SyntheticConfig  # noqa: E402
from encoderlab.train.trainer import Trainer  # noqa: E402

POOL = 8  # distinct batches cycled through by both steps


def batches(vocab: int, batch: int, seq: int, device: str = "cpu") -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randint(5, vocab, (batch, seq), generator=g).to(device) for _ in range(POOL)]


class PoolSource:
    """Full-length packed rows (no padding) cycled from a fixed pool: the data both steps see."""

    def __init__(self, pool: list[torch.Tensor]):
        self.pool, self.i = pool, 0

    def __iter__(self):
        while True:
            ids = self.pool[self.i % len(self.pool)]
            self.i += 1
            yield {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}

    def state_dict(self) -> dict:
        return {"i": self.i}

    def load_state_dict(self, state: dict) -> None:
        self.i = state["i"]


def our_trainer(name: str, dtype: str, batch: int, seq: int, run_dir: Path, compile: bool = False,
                device: str = "cpu") -> Trainer:
    cfg = preset(name)
    electra = cfg.family == "electra"
    rc = PretrainConfig(
        model=ModelSpec(preset=name, max_position_embeddings=seq),
        # MLM only (no NSP/SOP): the reference's BertForMaskedLM / AlbertForMaskedLM have no sentence head
        objective=ObjectiveConfig(kind="rtd") if electra else ObjectiveConfig(kind="mlm", sentence_loss=False),
        optimizer=OptimizerConfig(lr=1e-4, warmup_steps=0),
        data=DataConfig(kind="synthetic", batch_size=batch, seq_len=seq, eval_batches=0,
                        synthetic=SyntheticConfig(vocab_size=cfg.encoder.vocab_size)),
        trainer=TrainerConfig(run_dir=str(run_dir), max_steps=10**9, log_every=0, eval_every=0,
                              checkpoint_every=0, precision=dtype, resume="never", progress=False,
                              compile=compile, device=device))
    trainer = Trainer(rc, source=PoolSource(batches(cfg.encoder.vocab_size, batch, seq, device)))
    return trainer


def steps(name: str, dtype: str, batch: int, seq: int, tmp: Path, compile: bool = False, device: str = "cpu"):
    """{implementation: step()} and encoderlab's trainer (for its FLOPs count); with ``compile``
    also encoderlab's step with ``trainer.compile`` (torch.compile of each encoder). On a GPU each
    step waits for its kernels, so that it can be timed."""
    trainer = our_trainer(name, dtype, batch, seq, tmp / f"{name}-{dtype}", device=device)
    ref_step, _ = hf_step_fn(name, dtype=dtype, batch=batch, seq=seq, device=device)
    pool = batches(preset(name).encoder.vocab_size, batch, seq, device)
    state = {"i": 0}

    def run_ref():
        ids = pool[state["i"] % POOL]
        state["i"] += 1
        ref_step(ids)

    fns = {"encoderlab": synced(trainer.train_step, device), "transformers": synced(run_ref, device)}
    if compile:
        t = time.perf_counter()
        compiled = our_trainer(name, dtype, batch, seq, tmp / f"{name}-{dtype}-compiled", compile=True, device=device)
        compiled.train_step()  # compiles here, outside the timing
        print(f"{name} {dtype}: compiled in {time.perf_counter() - t:.0f} s", flush=True)
        fns["encoderlab_compiled"] = synced(compiled.train_step, device)
    return fns, trainer


def memory_child(name: str, impl: str, dtype: str, batch: int, seq: int, device: str = "cpu") -> None:
    """In a subprocess: the peak memory (MB) of building one implementation's step, alone, and
    running 3 of it: resident memory over the baseline on a CPU, the CUDA allocator's peak on a GPU."""
    base = peak_rss_mb()
    if impl == "encoderlab":
        fn = our_trainer(name, dtype, batch, seq, Path(tempfile.mkdtemp()), device=device).train_step
    else:
        ref_step, _ = hf_step_fn(name, dtype=dtype, batch=batch, seq=seq, device=device)
        pool = batches(preset(name).encoder.vocab_size, batch, seq, device)
        fn = lambda: ref_step(pool[0])  # noqa: E731
    for _ in range(3):
        fn()
    if device.startswith("cuda"):
        print(json.dumps({"peak_mb": torch.cuda.max_memory_allocated(device) / 2**20}))
    else:
        print(json.dumps({"peak_mb": peak_rss_mb() - base}))


def profile(name: str, dtype: str, batch: int, seq: int, tmp: Path, device: str = "cpu") -> str:
    fns, _ = steps(name, dtype, batch, seq, tmp, device=device)
    for _ in range(2):
        fns["encoderlab"]()
    gpu = device.startswith("cuda")
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if gpu else [])
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(3):
            fns["encoderlab"]()
    return prof.key_averages().table(sort_by="self_cuda_time_total" if gpu else "self_cpu_time_total", row_limit=15)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="electra-small,bert-small,albert-base")
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=20.0, help="timed seconds per implementation and case")
    ap.add_argument("--rounds", type=int, default=2, help="alternations of the two implementations")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json")
    ap.add_argument("--profile", action="store_true", help="print encoderlab's step by operator")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--compile", action="store_true", help="also time encoderlab's step under torch.compile")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ap.add_argument("--memory-child", nargs=3, metavar=("NAME", "IMPL", "DTYPE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.memory_child:
        return memory_child(*args.memory_child, args.batch, args.seq, args.device)
    tmp = Path(tempfile.mkdtemp())
    dtypes = args.dtypes.split(",")
    if not set(dtypes) <= {"fp32", "bf16"}:
        ap.error(f"--dtypes takes fp32 and/or bf16, got {args.dtypes!r} (auto is reported from those)")
    peaks = {d: matmul_peak({"fp32": torch.float32, "bf16": torch.bfloat16}[d], device=args.device) for d in dtypes}
    results = {"machine": machine(args.device), "device": args.device, "batch": args.batch, "seq": args.seq,
               "matmul_peak_flops": peaks, "rows": []}
    print(json.dumps(results["machine"]), {d: f"{p / 1e9:.0f} GFLOP/s" for d, p in peaks.items()})
    tokens = args.batch * args.seq
    for name in args.models.split(","):
        enc = preset(name).encoder
        auto = auto_precision(args.device, enc.hidden_size, enc.intermediate_size)
        print(f"{name}: precision auto -> {auto.precision} ({auto.reason})", flush=True)
        results.setdefault("auto", {})[name] = auto.to_dict()
        for dtype in dtypes:
            fns, trainer = steps(name, dtype, args.batch, args.seq, tmp, compile=args.compile, device=args.device)
            times = {k: [] for k in fns}
            for _ in range(args.rounds):  # alternate so drifts in machine load hit both alike
                for k, fn in fns.items():
                    times[k].append(timeit(fn, warmup=2, min_time=args.seconds / args.rounds))
            flops_per_step = trainer.flops / trainer.step  # analytic, same shapes every step
            row = {"model": name, "dtype": dtype}
            for k, ts in times.items():
                row[f"{k}_tokens_per_s"] = tokens / min(ts)
            row["speedup"] = row["encoderlab_tokens_per_s"] / row["transformers_tokens_per_s"]
            if "encoderlab_compiled" in times:
                row["speedup_compiled"] = row["encoderlab_compiled_tokens_per_s"] / row["transformers_tokens_per_s"]
            row["analytic_flops_per_token"] = flops_per_step / tokens
            row["encoderlab_mfu"] = flops_per_step / min(times["encoderlab"]) / peaks[dtype]
            # The most any implementation of the same FLOPs could gain over the reference here: ours
            # at 100% of the measured peak. A ceiling near the target means the reference is
            # already mostly matrix products, and only fewer FLOPs would reach it.
            row["speedup_ceiling"] = peaks[dtype] / (row["transformers_tokens_per_s"] * row["analytic_flops_per_token"])
            if not args.no_memory:
                for impl in ("encoderlab", "transformers"):
                    cmd = [sys.executable, __file__, "--memory-child", name, impl, dtype,
                           "--batch", str(args.batch), "--seq", str(args.seq), "--device", args.device]
                    if args.threads:
                        cmd += ["--threads", str(args.threads)]
                    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
                    row[f"{impl}_peak_mb"] = json.loads(out.strip().splitlines()[-1])["peak_mb"]
            results["rows"].append(row)
            print(json.dumps(row), flush=True)
            del fns, trainer
            if args.profile:
                print(f"--- encoderlab {name} {dtype}: by operator (3 steps) ---")
                print(profile(name, dtype, args.batch, args.seq, tmp, args.device), flush=True)
    for name, auto in results.get("auto", {}).items():
        rows = {r["dtype"]: r for r in results["rows"] if r["model"] == name}
        if auto["precision"] not in rows:
            continue
        ref = max(rows.values(), key=lambda r: r["transformers_tokens_per_s"])
        ours = rows[auto["precision"]]["encoderlab_tokens_per_s"]
        results.setdefault("auto_rows", []).append({
            "model": name, "encoderlab_precision": auto["precision"], "encoderlab_tokens_per_s": ours,
            "transformers_best_dtype": ref["dtype"], "transformers_tokens_per_s": ref["transformers_tokens_per_s"],
            "speedup": ours / ref["transformers_tokens_per_s"], "timed_dtypes": sorted(rows)})
        print(json.dumps(results["auto_rows"][-1]), flush=True)
    print(markdown(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


def markdown(res: dict) -> str:
    comp = any("speedup_compiled" in r for r in res["rows"])
    extra = " compiled tokens/s | compiled speed-up |" if comp else ""
    lines = ["| model | dtype | encoderlab tokens/s | transformers tokens/s | speed-up | encoderlab MFU | "
             "ceiling at peak | peak MB (ours / transformers) |" + extra,
             "|---|---|---|---|---|---|---|---|" + "---|---|" * comp]
    for r in res["rows"]:
        mem = f"{r['encoderlab_peak_mb']:.0f} / {r['transformers_peak_mb']:.0f}" if "encoderlab_peak_mb" in r else "-"
        line = (f"| {r['model']} | {r['dtype']} | {r['encoderlab_tokens_per_s']:.0f} | "
                f"{r['transformers_tokens_per_s']:.0f} | {r['speedup']:.2f}x | "
                f"{100 * r['encoderlab_mfu']:.1f}% | {r.get('speedup_ceiling', 0):.2f}x | {mem} |")
        if comp:
            line += (f" {r['encoderlab_compiled_tokens_per_s']:.0f} | {r['speedup_compiled']:.2f}x |"
                     if "speedup_compiled" in r else " - | - |")
        lines.append(line)
    if res.get("auto_rows"):
        lines += ["", "| model | auto resolves to | encoderlab tokens/s | transformers best (dtype) | speed-up |",
                  "|---|---|---|---|---|"]
        for r in res["auto_rows"]:
            lines.append(f"| {r['model']} | {r['encoderlab_precision']} | {r['encoderlab_tokens_per_s']:.0f} | "
                         f"{r['transformers_tokens_per_s']:.0f} ({r['transformers_best_dtype']}) | "
                         f"{r['speedup']:.2f}x |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
