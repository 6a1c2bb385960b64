"""What a study measures about each variant: checkpoints at fractions of the budget, curves,
downstream scores, size on disk, parameter counts and minimal pairs."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np

from encoderlab.checkpoint import load_model
from encoderlab.data.store import TokenStore
from encoderlab.data.tokenizer import load_tokenizer
from encoderlab.eval.finetune import build_classifier, finetune, one_class_scores
from encoderlab.eval.intrinsic import minimal_pairs_accuracy
from encoderlab.eval.tasks import TaskSpec, get_task, load_task
from encoderlab.models.build import build_model
from encoderlab.models.build import unshare as unshare_model
from encoderlab.models.config import ModelConfig
from encoderlab.models.pairs import ElectraPair, deployed
from encoderlab.runtime import resolve_runtime
from encoderlab.study.bow import bow_score
from encoderlab.study.config import StudyConfig, TaskRef
from encoderlab.study.results import Checkpoint, Curve
from encoderlab.train.state import checkpoint_info, list_checkpoints

DEMO_TASK = "demo"


def found_checkpoints(run_dir: Path) -> list[tuple[str, int, float]]:
    """(path, step, cumulative FLOPs) of every checkpoint in a run folder; [] where there is none."""
    return [(str(p), (info := checkpoint_info(p))["step"], info["flops"]) for p in list_checkpoints(run_dir)]


def nearest_checkpoints(found: list[tuple[str, int, float]], budget: float, fractions) -> dict[float, Checkpoint]:
    """For each fraction f, the checkpoint whose cumulative FLOPs are nearest f * budget."""
    out = {}
    for f in fractions:
        path, step, flops = min(found, key=lambda c: abs(c[2] - f * budget))
        out[f] = Checkpoint(path=path, step=step, flops=flops, fraction_of_budget=flops / budget)
    return out


def read_metrics(path: Path) -> Curve:
    """The train and eval records of a run's metrics.jsonl (the last record per step wins on resume),
    and the machine of each (re)start that changed machine or precision."""
    recs, machines = {"train": {}, "eval": {}}, []
    if path.exists():
        for r in _complete_records(path):
            if r.get("split") in recs:
                recs[r["split"]][r["step"]] = r
            elif r.get("split") == "run" and "precision" in r:  # a (re)start; a bare one notes a thread change
                m = {"step": r["step"], "machine": run_machine(r), "precision": r.get("precision")}
                if not machines or {**machines[-1], "step": m["step"]} != m:  # a change of machine or precision
                    machines.append(m)
    return Curve(**{k: [v[s] for s in sorted(v)] for k, v in recs.items()}, machines=machines)


def _complete_records(path: Path) -> list[dict]:
    """The records of a metrics.jsonl, less a last line still being written (no newline yet: a study
    reads a running pretraining's file, whose trainer may be half-way through a write). A broken line
    elsewhere is an error that names the file and line."""
    text = path.read_text()
    lines = text.split("\n")
    if lines and not text.endswith("\n"):
        lines = lines[:-1]  # a partial write; the empty string after a final newline too
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}, line {n}: not a JSON record ({e.msg})") from None
    return out


def run_machine(record: dict) -> str:
    """A metrics.jsonl "run" record's machine kind (precision.machine_kind); records written before the
    field carry it in the precision probe's CPU and capability when a probe ran."""
    if "machine" in record:
        return record["machine"]
    probe = record.get("probe") or {}
    if probe.get("cpu") and probe.get("capability"):
        return f"{probe['cpu']} / {probe['capability']}"
    return "not recorded"


def task_spec(task: TaskRef, data: dict):
    if task.name == DEMO_TASK:
        if not data.get("demo_task"):
            raise ValueError("task 'demo' needs the embedded demo corpus (no corpus given)")
        return TaskSpec(name="stdlib-package", text_a="text", label="label", data_dir=data["demo_task"]), None
    return get_task(task.name), task.data_dir or data.get("glue_dir")


def finetune_checkpoint(ck: str, task: TaskRef, cfg: StudyConfig, data: dict, *, unshare: bool = False,
                        init: str = "pretrained", learning_rate: float | None = None) -> dict:
    """All the study's fine-tuning seeds of one checkpoint on one task; ``init="random"``: the same
    architecture from fresh weights (the study's random-init control, eval/finetune.py);
    ``learning_rate``: one chosen on held-out training data (study/lr.py) in place of the study's."""
    spec, data_dir = task_spec(task, data)
    model = load_model(ck)
    if unshare:
        model = unshare_model(model)
    ft = cfg.finetune.replace(learning_rate=learning_rate) if learning_rate is not None else cfg.finetune
    r = finetune(model, spec, ft, cfg.seeds, data_dir=data_dir, tokenizer_dir=data["tokenizer"],
                 log=lambda *a: None, init=init)
    return {"task": r["task"], "score": r["score"], "summary": r["summary"],
            "per_seed": [s["score"] for s in r["seeds"]], "num_train": r["num_train"],
            "learning_rate": r["seeds"][0]["learning_rate"],  # by width where the study leaves it None
            "precision": r["precision"], "precision_reason": r["precision_reason"], "machine": r["machine"]}


def task_baselines(cfg: StudyConfig, data: dict) -> dict:
    """Per task, the score of each one-class predictor on its eval split(s), scored as the
    fine-tunings are: a fine-tuning whose every seed sits on one of them learned nothing from its
    encoder, and the best of them is the majority-class baseline."""
    out = {}
    for task in cfg.tasks:
        spec, data_dir = task_spec(task, data)
        one = one_class_scores(load_task(spec, data_dir), cfg.finetune)
        out[task.name] = {"one_class": one, "majority": max(one) if one else None}
    return out


def bow_baseline(task: TaskRef, cfg: StudyConfig, data: dict) -> float:
    """The task's bag-of-words logistic (ridge, for regression) baseline score (study/bow.py)."""
    spec, data_dir = task_spec(task, data)
    return bow_score(load_task(spec, data_dir), cfg.finetune)


def ngram_baseline(task: TaskRef, cfg: StudyConfig, data: dict) -> float | None:
    """The task's n-gram baseline (eval/probe.py: scikit-learn TF-IDF n-grams chosen by the language,
    regularisation chosen on a held-out fifth of the capped training set, fitted on the rest); None
    where the set is too small for it (no n-gram in two examples, or one class in the fitted part)."""
    from encoderlab.eval.probe import ngram_on_task

    spec, data_dir = task_spec(task, data)
    try:
        return ngram_on_task(load_task(spec, data_dir), cfg.finetune.max_train_examples,
                             cfg.finetune.max_eval_examples)["task_score"]
    except ValueError:
        return None


def one_class(ft: dict, baseline: dict | None) -> bool:
    """Whether every seed of a fine-tuning scored exactly what a one-class predictor scores."""
    return bool((baseline or {}).get("one_class")) and one_class_count(ft["per_seed"], baseline) == len(ft["per_seed"])


def one_class_count(scores, baseline: dict | None) -> int:
    """How many of ``scores`` (any shape: runs x seeds) are exactly what a one-class predictor scores."""
    one = (baseline or {}).get("one_class") or []
    return sum(any(abs(float(s) - b) < 1e-9 for b in one) for s in np.ravel(scores))


def deployed_architecture(model: ModelConfig):
    """The encoder a fine-tuning of a checkpoint of ``model`` deploys (an ELECTRA's discriminator, GDES
    tables written as plain ones), with fresh weights: what inference latency is timed on. A forward
    pass's time does not depend on the weights' values, so the study times it from the recipe, on a
    machine with or without the run's checkpoints."""
    return build_classifier(build_model(model), 2, fresh=True).encoder.eval()


def measure_model(ck: str, cfg: StudyConfig, data: dict) -> dict:
    """Size, parameters and minimal pairs (latency: study/speed.py, all variants side by side)."""
    model = load_model(ck).eval()
    net = deployed(model)
    ck = Path(ck)
    sub = ck / "discriminator" if (ck / "discriminator").is_dir() else ck
    weights = sub / "model.safetensors"
    out = {
        "params_total": sum(p.numel() for p in model.parameters()),
        "params_encoder": sum(p.numel() for p in net.encoder.parameters()),
        "checkpoint_mb": weights.stat().st_size / 1e6,
    }
    if cfg.minimal_pairs != "off":
        out["minimal_pairs"] = minimal_pairs(model, cfg, data, ck)
    return out


def derived_minimal_pairs(data: dict, path: Path, n: int = 300, seed: int = 0) -> Path:
    """Minimal pairs from held-out text: the good sentence as written, the bad one with two adjacent
    words swapped (UID "adjacent-swap"). Real sentences the models never trained on."""
    store = TokenStore(data["store"], "valid")
    tok = load_tokenizer(data["tokenizer"])
    rng = random.Random(seed)
    pairs = []
    for d in range(store.num_documents):
        for ids, _ in store.document(d):
            words = tok.decode([int(i) for i in ids]).split()
            if 6 <= len(words) <= 25:
                i = rng.randrange(len(words) - 1)
                if words[i] == words[i + 1]:
                    continue
                bad = words[:i] + [words[i + 1], words[i]] + words[i + 2:]
                pairs.append({"sentence_good": " ".join(words), "sentence_bad": " ".join(bad),
                              "UID": "adjacent-swap", "field": "word order"})
    rng.shuffle(pairs)
    path.write_text("".join(json.dumps(p) + "\n" for p in pairs[:n]))
    return path


def minimal_pairs(model, cfg: StudyConfig, data: dict, ck: Path) -> dict:
    path = Path(cfg.minimal_pairs) if cfg.minimal_pairs else Path(cfg.out_dir) / "data" / "minimal_pairs.jsonl"
    if not cfg.minimal_pairs and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)  # no data/ dir when the study reuses a store
        derived_minimal_pairs(data, path)
    tok = load_tokenizer(data["tokenizer"])
    runtime = resolve_runtime(cfg.base.trainer.precision, "cpu", deployed(model).encoder.config)
    runtime.apply(model)
    precision = runtime.precision
    out = {"precision": precision.precision}
    methods = ["mlm", "discriminator"] if isinstance(model, ElectraPair) else ["mlm"]
    for m in methods:  # for ELECTRA: "mlm" scores its generator, "discriminator" the discriminator
        r = minimal_pairs_accuracy(model, tok, path, method=m, precision=precision.precision)
        out["generator" if m == "mlm" and isinstance(model, ElectraPair) else m] = {
            "accuracy": r["accuracy"], "n": r["n"]}
    return out
