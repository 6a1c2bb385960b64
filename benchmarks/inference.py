"""Inference speed: encoderlab's encoder forward against transformers and ONNX Runtime, same weights,
same inputs, alternated in one run. Sequence 128, batch 1 and 32, fp32 and bf16 autocast.

    python benchmarks/inference.py [--models electra-small,bert-small] [--seconds 3] [--dtypes fp32,bf16]
        [--json out.json]

For each model it prints what ``precision: auto`` resolves to on this machine, and an auto row per
batch size: encoderlab in that precision against transformers in its best precision among those timed.

Peak memory is measured per implementation in a fresh subprocess (max RSS growth over the model
load, for one batch-32 forward), since one process cannot attribute its peak to a single variant.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import auto_precision, machine, peak_rss_mb, timeit  # noqa: E402

from encoderlab import checkpoint  # noqa: E402
from encoderlab.models.build import build_model  # noqa: E402
from encoderlab.models.presets import preset  # noqa: E402
from encoderlab.runtime import resolve_runtime  # noqa: E402

SEQ = 128


def network_config(name: str):
    cfg = preset(name)
    head = "discriminator" if cfg.family == "electra" else "encoder"
    return cfg.with_head(head, generator=None)


def build_all(name: str, tmp: Path):
    """Ours and transformers' model with identical weights (through our HF checkpoint format)."""
    import transformers

    cfg = network_config(name)
    ours = build_model(cfg).eval()
    checkpoint.save_model(ours, tmp / name)
    ref = transformers.AutoModel.from_pretrained(tmp / name) if cfg.head == "encoder" else \
        transformers.ElectraForPreTraining.from_pretrained(tmp / name)
    return ours, ref.eval(), cfg


def inputs(batch: int, vocab: int):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (batch, SEQ), generator=g)
    return ids, torch.ones(batch, SEQ, dtype=torch.long), torch.zeros(batch, SEQ, dtype=torch.long)


def runners(ours, ref, onnx_path, batch, vocab, dtype):
    ids, mask, types = inputs(batch, vocab)
    ctx = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if dtype == "bf16" else contextlib.nullcontext

    def run_ours():
        with torch.inference_mode(), ctx():
            ours(ids, mask, types)

    def run_ref():
        with torch.inference_mode(), ctx():
            ref(input_ids=ids, attention_mask=mask, token_type_ids=types)

    out = {"encoderlab": run_ours, "transformers": run_ref}
    if onnx_path is not None and dtype == "fp32":
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = torch.get_num_threads()
        # ORT's workers busy-wait after a run by default, which would steal the cores from the
        # PyTorch runs alternated with it.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sess = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
        feed = {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "token_type_ids": types.numpy()}
        out["onnxruntime"] = lambda: sess.run(None, feed)
    return out


def memory_child(name: str, impl: str, ckpt: str) -> None:
    """Run in a subprocess: print max-RSS growth (MB) of one batch-32 fp32 forward."""
    ours, ref, cfg = build_all(name, Path(ckpt))
    if impl == "encoderlab":
        del ref
    else:
        del ours
    ids, mask, types = inputs(32, cfg.encoder.vocab_size)
    before = reset_peak_rss_mb()
    with torch.inference_mode():
        if impl == "encoderlab":
            ours(ids, mask, types)  # noqa: F821 (deleted only in the other branch)
        else:
            ref(input_ids=ids, attention_mask=mask, token_type_ids=types)
    print(json.dumps({"peak_mb": peak_rss_mb() - before}))


def reset_peak_rss_mb() -> float:
    """Reset the kernel's high-water mark (VmHWM) to the current RSS and return it (MB)."""
    import gc

    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")
    return peak_rss_mb()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="electra-small,bert-small")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=2, help="alternations of the implementations")
    ap.add_argument("--dtypes", default="fp32,bf16", help="fp32 and/or bf16 (auto is reported from those)")
    ap.add_argument("--json")
    ap.add_argument("--memory-child", nargs=3, metavar=("NAME", "IMPL", "CKPT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_child:
        return memory_child(*args.memory_child)
    results = {"machine": machine(), "rows": [], "auto_rows": []}
    print(json.dumps(results["machine"]))
    tmp = Path(tempfile.mkdtemp())
    for name in args.models.split(","):
        ours, ref, cfg = build_all(name, tmp)
        onnx_path = None
        try:
            from encoderlab.interop.onnx import export_onnx

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                onnx_path = export_onnx(ours, tmp / f"{name}.onnx")
        except ImportError as e:
            print(f"ONNX Runtime skipped: {e}")
        auto = auto_precision("cpu", cfg.encoder.hidden_size, cfg.encoder.intermediate_size)
        print(f"{name}: precision auto -> {auto.precision} ({auto.reason})", flush=True)
        for dtype in args.dtypes.split(","):
            resolve_runtime(dtype, "cpu", cfg.encoder).apply(ours)  # the attention kernel a run in dtype uses
            for batch in (1, 32):
                fns = runners(ours, ref, onnx_path, batch, cfg.encoder.vocab_size, dtype)
                times = {k: [] for k in fns}
                for _ in range(args.rounds):  # alternate so drifts in machine load hit all alike
                    for k, fn in fns.items():
                        times[k].append(timeit(fn, min_time=args.seconds / args.rounds))
                row = {"model": name, "dtype": dtype, "batch": batch}
                for k, ts in times.items():
                    row[f"{k}_ms"] = 1000 * min(ts)
                row["speedup_vs_transformers"] = row["transformers_ms"] / row["encoderlab_ms"]
                results["rows"].append(row)
                print(json.dumps(row), flush=True)
        for batch in (1, 32):
            rows = {r["dtype"]: r for r in results["rows"] if r.get("model") == name and r.get("batch") == batch
                    and "encoderlab_ms" in r}
            if auto.precision in rows:
                ref = min(rows.values(), key=lambda r: r["transformers_ms"])
                a = {"model": name, "batch": batch, "encoderlab_precision": auto.precision,
                     "encoderlab_ms": rows[auto.precision]["encoderlab_ms"], "transformers_best_dtype": ref["dtype"],
                     "transformers_ms": ref["transformers_ms"], "timed_dtypes": sorted(rows)}
                a["speedup_vs_transformers"] = a["transformers_ms"] / a["encoderlab_ms"]
                results["auto_rows"].append(a)
                print(json.dumps(a), flush=True)
        for impl in ("encoderlab", "transformers"):
            out = subprocess.run([sys.executable, __file__, "--memory-child", name, impl, str(tmp)],
                                 capture_output=True, text=True, check=True).stdout
            mb = json.loads(out.strip().splitlines()[-1])["peak_mb"]
            results["rows"].append({"model": name, "memory": impl, "batch": 32, "peak_mb": mb})
            print(f"{name} {impl} batch-32 forward peak RSS growth: {mb:.0f} MB")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
