"""The blockwise vocabulary cross-entropy (objectives/token_ce.py) against the whole-matrix fp32
log-softmax path it replaced, in the claims study's pretraining steps, alternated in one process.

    python benchmarks/vocab_ce.py [--variants bert,gpt-bert,clm,clm-then-mlm,electra] [--threads 1]
        [--rounds 5] [--seconds 3] [--json out.json]

Each variant is the built-in claims study's recipe (4 x 128, rotary positions, 8,192-piece vocabulary,
batch 32 x 128, its objective and precision), on synthetic full-length rows (speed does not depend on
the tokens). clm-then-mlm is timed in its causal phase (its MLM phase is bert's step). Both paths
run the same trainer; the reference swaps the objectives' token_nll for log_softmax_nll and samples
ELECTRA's replacements from the whole (M, V) matrix at once, as before the change. Rounds
alternate the two paths (the order flips each round); the best round of each is reported, as the
study's speed stage does: other work on the machine can only slow a round down.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine  # noqa: E402

import encoderlab.objectives.causal as causal  # noqa: E402
import encoderlab.objectives.mlm as mlm  # noqa: E402
import encoderlab.objectives.rtd as rtd  # noqa: E402
import encoderlab.objectives.token_ce as token_ce  # noqa: E402
from encoderlab.objectives.token_ce import log_softmax_nll, token_nll  # noqa: E402
from encoderlab.study.cli import load_study  # noqa: E402
from encoderlab.study.plan import plan  # noqa: E402
from encoderlab.train.config import SyntheticConfig  # noqa: E402
from encoderlab.train.flops import planned_step_flops  # noqa: E402
from encoderlab.train.trainer import Trainer  # noqa: E402

PATHS = {"blockwise": token_nll, "log_softmax": log_softmax_nll}
BLOCK = token_ce.CPU_BLOCK_BYTES


def use(path: str) -> None:
    for module in (mlm, causal, rtd):
        module.token_nll = PATHS[path]
    token_ce.CPU_BLOCK_BYTES = BLOCK if path == "blockwise" else 1 << 62  # the sampler: one block


class _Vocab:  # study plans read only the store's vocabulary size (tests/conftest.py, stand_in_store)
    vocab_size = 8192

    def __init__(self, path):
        pass


def recipes(names: list[str], run_dir: Path) -> dict:
    import encoderlab.study.plan as study_plan

    study_plan.TokenStore = _Vocab
    cfg = load_study("claims")
    data = {"store": "store", "tokenizer": "tok", "demo_task": None, "tokens": 1}
    planned = plan(cfg, data, run_dir)
    out = {}
    for n in names:
        r = planned[n]
        out[n] = r.replace(
            data=r.data.replace(kind="synthetic", path=None, tokenizer_dir=None, short_seq_steps=0, eval_batches=0,
                                synthetic=SyntheticConfig(vocab_size=_Vocab.vocab_size)),
            trainer=r.trainer.replace(run_dir=str(run_dir / n), resume="never", max_flops=None, max_steps=10**9,
                                      log_every=0, eval_every=0, checkpoint_every=0, progress=False))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variants", default="bert,gpt-bert,clm,clm-then-mlm,electra")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    info = {**machine(), "threads": args.threads, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    print(json.dumps(info), flush=True)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, recipe in recipes(args.variants.split(","), Path(tmp)).items():
            tr = Trainer(recipe)
            B, T = recipe.data.batch_size, recipe.data.seq_len
            rates: dict[str, list[float]] = {p: [] for p in PATHS}
            for p in PATHS:  # warm-up: first-call allocations
                use(p)
                tr.train_step()
            for r in range(args.rounds):
                for p in (list(PATHS) if r % 2 == 0 else list(PATHS)[::-1]):
                    use(p)
                    n, start = 0, time.perf_counter()
                    while n < 2 or time.perf_counter() - start < args.seconds:
                        tr.train_step()
                        n += 1
                    rates[p].append(n * B * T / (time.perf_counter() - start))
            best = {p: max(v) for p, v in rates.items()}
            flops = planned_step_flops(tr.model_cfg, tr.ocfg, B, T) if name != "clm-then-mlm" else None
            results[name] = {"tokens_per_s": best, "speedup": best["blockwise"] / best["log_softmax"],
                             "rounds": rates, "precision": tr.precision.precision,
                             "gflop_per_s": {p: flops * v / (B * T) / 1e9 for p, v in best.items()} if flops else None}
            print(f"{name:13s} {tr.precision.precision}: blockwise {best['blockwise']:,.0f} tokens/s, log-softmax "
                  f"{best['log_softmax']:,.0f}: {results[name]['speedup']:.2f}x", flush=True)
    use("blockwise")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": info, "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
