"""One point of the transfer frontier: a pretraining run's checkpoint, its random-init twin, the
linear probes and the baselines on each task, under the fair protocol (transfer/protocol.py).

Records are JSON files in one folder, written as each lands (a rerun skips what is recorded under
the same protocol, so an interrupted point resumes):

- ``{run}__{task}.json``: the checkpoint's fine-tunings and linear probe, with its pretraining FLOPs,
  family, architecture and the run's own record (seed, steps, held-out pretraining metrics);
- ``control-{arch}__{task}.json``: the twin, fresh weights of the same architecture: one per
  architecture, not per budget, since fresh weights do not depend on how long the checkpoint trained;
- ``baselines__{task}.json``: the majority class and the n-gram baseline (no network).

Each names the protocol (FairConfig), the task's files and the tokenizer's digest; a record made
under another protocol or tokenizer is computed again, never mixed in.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from pathlib import Path

import yaml

from encoderlab.checkpoint import load_model
from encoderlab.data.tokenizer import load_tokenizer
from encoderlab.eval.probe import linear_probe
from encoderlab.eval.tasks import get_task, load_task
from encoderlab.models.pairs import deployed
from encoderlab.precision import machine_kind
from encoderlab.transfer.protocol import FairConfig, baselines, dev_split, fair_finetune, split, summary
from encoderlab.tune.results import versions


def arch_key(model) -> str:
    """A short digest of the deployed encoder's configuration: equal for two checkpoints whose
    fresh twins are the same network."""
    cfg = deployed(model).config
    text = json.dumps({"family": cfg.family, "encoder": cfg.encoder.to_dict()}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


# The baselines' definition: a record of another version is computed again (2: the n-gram baseline's
# characters 2-5-grams, and 1-2-grams for Chinese and Japanese; 1 had 2-4-grams for every language).
BASELINES_VERSION = 2
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")


def tokenizer_files_digest(model_dir: Path) -> str:
    """sha256 of the tokenizer files a checkpoint folder holds (names and bytes), not its weights."""
    h = hashlib.sha256()
    for name in TOKENIZER_FILES:
        if (model_dir / name).is_file():
            h.update(name.encode() + b"\0" + (model_dir / name).read_bytes())
    return h.hexdigest()


def run_record(run_dir: Path) -> dict:
    """What the pretraining run recorded of itself (metrics.jsonl, config.yaml): its seed, FLOPs,
    steps, seconds and threads of its last training line, its machine and precision, and its last
    held-out evaluation; {} for a checkpoint with no run beside it (an imported model)."""
    metrics = run_dir / "metrics.jsonl"
    if not metrics.is_file():
        return {}
    lines = [json.loads(x) for x in metrics.read_text().splitlines() if x.strip()]
    last = {split: next((x for x in reversed(lines) if x.get("split") == split), {})
            for split in ("run", "train", "eval")}
    config = yaml.safe_load((run_dir / "config.yaml").read_text()) if (run_dir / "config.yaml").is_file() else {}
    train = last["train"]
    rates = [x["tokens_per_s"] for x in lines if x.get("split") == "train" and x.get("tokens_per_s")]
    return {"seed": (config.get("trainer") or {}).get("seed"), "flops": train.get("flops"), "steps": train.get("step"),
            "elapsed_s": train.get("elapsed_s"), "threads": train.get("threads"), "tokens": train.get("tokens"),
            # the fastest logged stretch: the run's rate with the least else on its cores
            "best_tokens_per_s": max(rates, default=None),
            "machine": last["run"].get("machine"), "precision": last["run"].get("precision"),
            "eval": {k: v for k, v in last["eval"].items() if k.startswith("eval_") or k == "step"}}


def _write(path: Path, record: dict) -> None:
    tmp = path.with_suffix(".json.tmp")  # a crash mid-write leaves the last record whole
    tmp.write_text(json.dumps(record, indent=1, default=float) + "\n")
    os.replace(tmp, path)


def _valid(path: Path, cfg: FairConfig, tok_digest: str, files: dict) -> bool:
    if not path.is_file():
        return False
    rec = json.loads(path.read_text())
    return rec.get("protocol") == cfg.to_dict() and rec.get("tokenizer_sha256") == tok_digest \
        and rec.get("files") == files


def transfer_point(model_dir: str | Path, tasks: list[str], out: str | Path, *, name: str, flops: float | None,
                   cfg: FairConfig | None = None, data_dir: str | Path | None = None, controls: bool = True,
                   pretrained_too: bool = True, log=print) -> list[Path]:
    """Fine-tune (and probe) the checkpoint at ``model_dir`` and, with ``controls``, its fresh twin on
    every task; write the records into ``out``; return their paths (recorded ones included).
    ``pretrained_too=False``: the twin alone (it needs only the architecture: a run still pretraining
    can lend it any of its checkpoints)."""
    cfg = cfg or FairConfig()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model_dir = Path(model_dir)
    pretrained = load_model(model_dir)
    tok = load_tokenizer(model_dir)
    digest = tokenizer_files_digest(model_dir)
    arch = arch_key(pretrained)
    # a run's checkpoint (RUN/checkpoints/step-N) reads its run's own record
    pretraining = run_record(model_dir.parent.parent if model_dir.parent.name == "checkpoints" else model_dir)
    flops = flops if flops is not None else pretraining.get("flops")
    common = {"protocol": cfg.to_dict(), "tokenizer_sha256": digest, "machine": machine_kind(),
              "host": platform.node(), "versions": versions()}
    written = []
    for task in tasks:
        spec = get_task(task)
        data = split(load_task(spec, data_dir), cfg)
        files = data.files
        jobs = [(out / f"{name}__{spec.name}.json", "pretrained")] if pretrained_too else []
        if controls:
            jobs.append((out / f"control-{arch}__{spec.name}.json", "random"))
        for path, init in jobs:
            written.append(path)
            if _valid(path, cfg, digest, files):
                log(f"[transfer] {path.name}: recorded")
                continue
            log(f"[transfer] {name if init == 'pretrained' else 'random init'} on {spec.name}: "
                f"{len(cfg.learning_rates) * len(cfg.layer_decays)} settings x {cfg.seeds} seeds, "
                f"{len(data.train)} train / {len(data.evals['heldout'])} held out")
            t0 = time.time()
            result = fair_finetune(pretrained, tok, data, cfg, init=init, log=log)
            dev = dev_split(data)
            probe = linear_probe(pretrained, tok, data.spec, data.train, data.evals["heldout"], {dev: data.evals[dev]},
                                 fresh=init == "random")["score"][dev]
            rec = {**common, "files": files, "task": spec.name, "init": init, "arch": arch,
                   "family": deployed(pretrained).config.family,
                   **({"run": name, "flops": flops, "model_dir": str(model_dir),
                       "pretraining": pretraining} if init == "pretrained" else {}),
                   "fair": result, "summary": summary(result),
                   "probe": probe,
                   "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "wall_s": round(time.time() - t0, 1)}
            _write(path, rec)
            s = rec["summary"]
            log(f"[transfer] {path.name}: dev mean {s['mean']:.4f} over {s['n']} seeds ({s['collapses']} collapsed), "
                f"probe {rec['probe']:.4f}, at lr {result['chosen']['learning_rate']:g} epoch "
                f"{result['chosen']['epoch']:g}; {rec['wall_s']:.0f} s")
        path = out / f"baselines__{spec.name}.json"
        written.append(path)
        if not _valid(path, cfg, digest, files) or json.loads(path.read_text()).get("version") != BASELINES_VERSION:
            b = baselines(data)
            _write(path, {**common, "files": files, "task": spec.name, "version": BASELINES_VERSION, **b})
            log(f"[transfer] {path.name}: majority {b['majority']:.4f}, n-gram {b['ngram']:.4f}")
    return written
