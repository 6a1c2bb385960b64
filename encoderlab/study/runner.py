"""``encoderlab study STUDY.yaml``: pretrain every variant at the same FLOPs budget on the same
token store, evaluate checkpoints at fractions of the budget, measure speed/memory/size, and write
the report.

Stages are recorded in ``OUT/stages.json`` with a fingerprint of everything they depend on, so a
rerun skips finished stages, adding a variant runs only that variant (and the speed stage, which
times all variants together), and an interrupted pretraining resumes from its last checkpoint (the
trainer's exact resume). Each pretraining runs in its own process, up to pretrain_jobs at once: a
crash cannot take the study down, and its peak memory is its own.
"""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from encoderlab.config import ConfigError, renamed_bf16
from encoderlab.study.config import StudyConfig, VariantSpec
from encoderlab.study.progress import Progress, pretraining_status


class Stages:
    """Finished stages, keyed by name, each with the fingerprint it was computed under."""

    def __init__(self, path: Path):
        self.path = path
        self.data = json.loads(path.read_text()) if path.exists() else {}

    def get(self, key: str, fingerprint: str):
        rec = self.data.get(key)
        return rec["result"] if rec and rec["fingerprint"] == fingerprint else None

    def put(self, key: str, fingerprint: str, result) -> None:
        self.data[key] = {"fingerprint": fingerprint, "result": result}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        os.replace(tmp, self.path)


def fingerprint(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def run_study(cfg: StudyConfig, *, log=print) -> dict:
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg.to_yaml(out / "study.yaml")
    stages = Stages(out / "stages.json")
    # Units for the ETA: one per variant pretraining (the bulk), smaller ones for the rest.
    n_ft = (len(cfg.variants) * len(cfg.finetune_fractions) + sum(v.unshare for v in cfg.variants)) * len(cfg.tasks)
    progress = Progress(len(cfg.variants) * 10 + n_ft * 2 + len(cfg.variants) + 2, log)
    try:
        return _run_stages(cfg, out, stages, progress)
    finally:
        progress.close()


def _run_stages(cfg: StudyConfig, out: Path, stages: Stages, progress: Progress) -> dict:
    data = {**prepare_data(cfg, out, stages, progress), "glue_dir": cfg.glue_dir}
    recipes = {v.name: recipe_for(cfg, v, data, out / "runs" / v.name) for v in cfg.variants}
    pretrain_all(cfg, recipes, stages, progress)
    finetune_all(cfg, recipes, data, stages, progress)
    from encoderlab.study import measure

    results = {"config": cfg.to_dict(), "data": data, "variants": {}, "baselines": measure.task_baselines(cfg, data),
               "mlm_baselines": mlm_baselines(recipes, stages, progress)}
    for v in cfg.variants:
        results["variants"][v.name] = run_variant(cfg, v, recipes[v.name], data, stages, progress)
    side_by_side(cfg, recipes, results["variants"], stages, progress)
    from encoderlab.study.report import write_report

    progress.stage("writing the report")
    report = write_report(cfg, results, out)
    progress.stage(f"done: {out / 'report.md'}")
    return report


# ---- data ----------------------------------------------------------------------------------------
def prepare_data(cfg: StudyConfig, out: Path, stages: Stages, progress: Progress) -> dict:
    from encoderlab.data.corpus import CorpusConfig
    from encoderlab.data.prepare import PrepareConfig, prepare
    from encoderlab.data.store import TokenStore

    if cfg.store:
        store = TokenStore(cfg.store)
        return {"store": cfg.store, "tokenizer": str(store.tokenizer_dir), "demo_task": None,
                "tokens": store.num_tokens}
    key_fp = fingerprint(cfg.corpus, cfg.tokenizer, cfg.vocab_size, cfg.max_documents, cfg.seed)
    done = stages.get("data", key_fp)
    if done:
        return done
    data_dir = out / "data"
    corpus, demo_task = list(cfg.corpus), None
    if not corpus:
        from encoderlab.study.demo_corpus import build

        progress.stage("data: extracting the demo corpus (standard-library docstrings)")
        info = build(data_dir / "demo")
        corpus, demo_task = [str(data_dir / "demo" / "corpus.txt")], str(data_dir / "demo" / "task")
        progress.stage(f"data: {info['passages']} passages, {info['words']} words; task labels {info['labels']}")
    ccfg = CorpusConfig(paths=tuple(corpus))
    tok_dir = cfg.tokenizer
    if tok_dir is None:
        from encoderlab.data.corpus import Corpus
        from encoderlab.data.tokenizer import train_tokenizer

        tok_dir = str(data_dir / "tokenizer")
        progress.stage(f"data: training a WordPiece tokenizer (vocab {cfg.vocab_size})")
        train_tokenizer(_capped(Corpus(ccfg), cfg.max_documents), vocab_size=cfg.vocab_size, out=tok_dir)
    progress.stage("data: tokenizing into the token store")
    meta = prepare(PrepareConfig(corpus=ccfg, seed=cfg.seed, valid_fraction=0.05), tok_dir, data_dir / "store")
    result = {"store": str(data_dir / "store"), "tokenizer": tok_dir, "demo_task": demo_task,
              "tokens": meta["counts"]["train"]["tokens"]}
    stages.put("data", key_fp, result)
    return result


def _capped(it, n):
    for i, x in enumerate(it):
        if n is not None and i >= n:
            return
        yield x


def mlm_baselines(recipes: dict[str, dict], stages: Stages, progress: Progress) -> dict:
    """Unigram and bigram accuracy at the held-out evaluation's masked positions, which are the same
    for every variant (train/baselines.py): the scale on which the report says who left the plateau."""
    from encoderlab.train.baselines import count_baselines
    from encoderlab.train.config import PretrainConfig

    recipe = {**next(iter(recipes.values())), "objective": {"kind": "mlm"}}
    data = {k: x for k, x in recipe["data"].items() if k != "short_seq_steps"}  # held-out data is full length
    fp = fingerprint(data, recipe["trainer"]["seed"])
    got = stages.get("mlm_baselines", fp)
    if got is None:
        progress.stage("held-out baselines: unigram and bigram counts")
        got = count_baselines(PretrainConfig.from_dict(recipe))
        stages.put("mlm_baselines", fp, got)
    return got


# ---- one variant ---------------------------------------------------------------------------------
def recipe_for(cfg: StudyConfig, v: VariantSpec, data: dict, run_dir: Path) -> dict:
    """The PretrainConfig (as a dict) of one variant: shared data, budget and schedule."""
    from encoderlab.data.store import TokenStore
    from encoderlab.train.config import InitConfig, PretrainConfig
    from encoderlab.train.flops import step_flops
    from encoderlab.train.init import resolve_model

    B, T = cfg.batch_size, cfg.seq_len
    vocab = TokenStore(data["store"]).vocab_size
    model_cfg = resolve_model(v.model, InitConfig(), vocab)
    M = round(v.objective.masking.rate * B * (T - 2))
    per_step = step_flops(model_cfg, v.objective, B, T, M).total
    steps = max(1, math.ceil(cfg.budget_flops / per_step))
    every = max(1, round(min(cfg.eval_fractions) * steps))
    recipe = {
        "model": v.model.to_dict(),
        "objective": v.objective.to_dict(),
        "optimizer": {"lr": v.lr or cfg.lr, "warmup_steps": max(1, round(cfg.warmup_fraction * steps))},
        "data": {"kind": "store", "path": data["store"], "tokenizer_dir": data["tokenizer"], "batch_size": B,
                 "seq_len": T, "eval_batches": cfg.eval_batches, "short_seq_len": cfg.short_seq_len,
                 # steps counted at full length; the short ones cost a little less, so the warm-up's
                 # share of the budget is slightly below short_seq_fraction for every variant alike
                 "short_seq_steps": round(cfg.short_seq_fraction * steps)},
        "trainer": {"run_dir": str(run_dir), "seed": cfg.seed, "max_flops": cfg.budget_flops,
                    "precision": cfg.precision,
                    "log_every": max(1, every // 4), "eval_every": every, "checkpoint_every": every,
                    "keep_last": 10_000, "progress": False},
    }
    PretrainConfig.from_dict(recipe)  # validate now, with the variant's name in any error
    return recipe


def pretrain_all(cfg: StudyConfig, recipes: dict[str, dict], stages: Stages, progress: Progress) -> None:
    """Pretrain every variant not done yet, up to cfg.pretrain_jobs at once, each in its own
    process (resuming by itself from its last checkpoint). After a failure no new variant starts;
    the running ones finish, and the study stops naming the failures and their logs. If the study
    itself stops (an error, Ctrl-C, SIGTERM), its children are stopped first (SIGTERM: they save a
    checkpoint), so that a rerun never finds a second trainer writing the same run directory."""
    todo = [name for name, r in recipes.items() if stages.get(f"pretrain:{name}", fingerprint(r)) is None]
    for name in todo:
        check_run_dir(name, recipes[name])
    progress.advance(10 * (len(recipes) - len(todo)), cached=True)
    threads = cfg.threads_per_job()
    env = dict(os.environ) if threads is None else dict(os.environ, OMP_NUM_THREADS=str(threads))
    running: dict[str, tuple[subprocess.Popen, float]] = {}
    failed: list[str] = []

    def reap(name: str, proc: subprocess.Popen, started: float) -> None:
        del running[name]
        progress.advance(10)
        if proc.returncode == 0:
            stages.put(f"pretrain:{name}", fingerprint(recipes[name]), {"wall_s": time.perf_counter() - started})
            return
        log = Path(recipes[name]["trainer"]["run_dir"]) / "pretrain.log"
        failed.append(f"variant {name!r} (exit {proc.returncode}); log {log}:\n{_tail(log)}")
        progress.stage(f"pretrain {name} failed (exit {proc.returncode}); see {log}")

    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    progress.detail = lambda: [pretraining_status(n, Path(recipes[n]["trainer"]["run_dir"]), cfg.budget_flops)
                               for n in list(running)]
    try:
        while running or (todo and not failed):
            while todo and not failed and len(running) < cfg.pretrain_jobs:
                name = todo.pop(0)
                progress.stage(f"pretrain {name}: {cfg.budget_flops:.3g} FLOPs budget"
                               + (f" ({len(running) + 1} running)" if cfg.pretrain_jobs > 1 else ""))
                running[name] = (start_pretraining(recipes[name], env), time.perf_counter())
            time.sleep(0.2)
            for name, (proc, started) in list(running.items()):
                if proc.poll() is not None:
                    reap(name, proc, started)
    except BaseException:
        for proc, _ in running.values():
            proc.send_signal(signal.SIGTERM)
        for name, (proc, started) in list(running.items()):
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            reap(name, proc, started)
        raise
    finally:
        progress.detail = None
        signal.signal(signal.SIGTERM, previous)
    if failed:
        skipped = f"\nnot started: {', '.join(todo)}" if todo else ""
        raise RuntimeError("pretraining failed: " + "\n".join(failed) + skipped)


def check_run_dir(name: str, recipe: dict) -> None:
    """Refuse to resume a run directory that holds checkpoints of another recipe (a study rerun with
    another budget, model or schedule): its trainer would continue the old run on the new schedule and
    mix both in one folder. The folder is left as it is."""
    import yaml

    from encoderlab.train.state import list_checkpoints

    run_dir = Path(recipe["trainer"]["run_dir"])
    saved = run_dir / "study_recipe.yaml"
    if not saved.exists() or not list_checkpoints(run_dir):
        return
    old, new = _flat(yaml.safe_load(saved.read_text())), _flat(recipe)
    if "trainer.bf16" in old:  # written before trainer.precision: read as the trainer reads it
        old["trainer.precision"] = renamed_bf16(old.pop("trainer.bf16"))[1]
    changed = [f"{k}: {old.get(k)} -> {new.get(k)}" for k in sorted(old.keys() | new.keys())
               if old.get(k) != new.get(k)]
    if changed:
        raise ConfigError(f"variant {name!r}: {run_dir} holds checkpoints of another recipe ({'; '.join(changed)}); "
                          "a study does not continue them under a new one. Move that folder away, or give the "
                          "study another out_dir, to pretrain this recipe")


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _tail(path: Path, lines: int = 15) -> str:
    with open(path, "rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - 8192))
        return "\n".join(f.read().decode(errors="replace").splitlines()[-lines:])


def start_pretraining(recipe: dict, env: dict) -> subprocess.Popen:
    """``encoderlab pretrain`` of one recipe in a child process, its output appended to pretrain.log."""
    import yaml

    run_dir = Path(recipe["trainer"]["run_dir"])
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "study_recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    with open(run_dir / "pretrain.log", "a") as logf:  # the child keeps its own handle
        return subprocess.Popen([sys.executable, "-m", "encoderlab", "pretrain", str(run_dir / "study_recipe.yaml")],
                                stdout=logf, stderr=subprocess.STDOUT, env=env)


def _finetune_fp(cfg: StudyConfig) -> dict:
    """The fine-tuning settings a result depends on: not the device, so a study started on a CPU can
    be finished on a GPU machine (or the other way) without redoing its fine-tunings."""
    return {k: v for k, v in cfg.finetune.to_dict().items() if k != "device"}


def finetune_units(cfg: StudyConfig, v: VariantSpec, recipe: dict, checkpoints: dict) -> list[dict]:
    """One variant's fine-tunings: a checkpoint on a task with all seeds, each a stage of its own."""
    fp = fingerprint(recipe)
    units = []
    for frac in cfg.finetune_fractions:
        ck = checkpoints[str(frac)]["path"]
        for task in cfg.tasks:
            kinds = [("", False)] + ([("+unshared", True)] if v.unshare and frac == max(cfg.finetune_fractions) else [])
            for suffix, unshare in kinds:
                units.append({"key": f"finetune:{v.name}{suffix}:{frac}:{task.name}",
                              "fp": fingerprint(fp, ck, task.to_dict(), _finetune_fp(cfg), cfg.seeds, unshare),
                              "result": f"{task.name}{suffix}@{frac}", "ck": ck, "task": task, "unshare": unshare,
                              "label": f"{v.name}{suffix} at {frac:g} of the budget on {task.name}"})
    return units


def finetune_all(cfg: StudyConfig, recipes: dict[str, dict], data: dict, stages: Stages,
                 progress: Progress) -> None:
    """Every fine-tuning not done yet: in this process with one job, else up to finetune_jobs
    worker processes at once (spawned: a forked copy of a process that already ran torch's thread
    pool can hang), each stored as it finishes so an interrupted study keeps what it got."""
    from encoderlab.study import measure

    todo = []
    for v in cfg.variants:
        cks = measure.checkpoints_at(Path(recipes[v.name]["trainer"]["run_dir"]), cfg.budget_flops, cfg.eval_fractions)
        for u in finetune_units(cfg, v, recipes[v.name], cks):
            if stages.get(u["key"], u["fp"]) is None:
                todo.append(u)
            else:
                progress.advance(2, cached=True)
    jobs = min(cfg.finetune_jobs or cfg.pretrain_jobs, len(todo))
    if jobs <= 1:
        import torch

        before = torch.get_num_threads()
        _set_threads(cfg.threads_per_job(1))
        try:
            for u in todo:
                progress.stage(f"fine-tune {u['label']} ({cfg.seeds} seeds)")
                stages.put(u["key"], u["fp"], _finetune_unit((u, cfg, data))[1])
                progress.advance(2)
        finally:
            torch.set_num_threads(before)
        return
    progress.stage(f"fine-tune {len(todo)} checkpoint-task pairs, {jobs} at once ({cfg.seeds} seeds each): "
                   + ", ".join(u["label"] for u in todo[:jobs]) + (", ..." if len(todo) > jobs else ""))
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    finished = []
    progress.detail = lambda: [f"fine-tuning: {len(finished)} of {len(todo)} checkpoint-task pairs done, "
                               f"{jobs} at once"]
    try:  # leaving the with block terminates the workers, also on an error or a signal
        with multiprocessing.get_context("spawn").Pool(jobs, _set_threads, (cfg.threads_per_job(jobs),)) as pool:
            for u, r in pool.imap_unordered(_finetune_unit, [(u, cfg, data) for u in todo]):
                stages.put(u["key"], u["fp"], r)
                finished.append(u["key"])
                progress.advance(2)
                scores = ", ".join(f"{m} {s['median']:.3f} ± {s['std']:.3f}" for m, s in r["summary"].items())
                progress.stage(f"fine-tuned {u['label']}: {scores} (median ± std of {cfg.seeds} seeds)")
    finally:
        progress.detail = None
        signal.signal(signal.SIGTERM, previous)


def _set_threads(threads: int | None) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)


def _finetune_unit(args: tuple) -> tuple[dict, dict]:
    from encoderlab.study import measure

    u, cfg, data = args
    return u, measure.finetune_checkpoint(u["ck"], u["task"], cfg, data, unshare=u["unshare"])


def run_variant(cfg: StudyConfig, v: VariantSpec, recipe: dict, data: dict, stages: Stages,
                progress: Progress) -> dict:
    """Checkpoints, curves, fine-tuning and measurements of one pretrained variant."""
    from encoderlab.study import measure

    run_dir = Path(recipe["trainer"]["run_dir"])
    fp = fingerprint(recipe)
    res = {"spec": v.to_dict(), "run_dir": str(run_dir), "pretrain": stages.get(f"pretrain:{v.name}", fp)}
    res["checkpoints"] = measure.checkpoints_at(run_dir, cfg.budget_flops, cfg.eval_fractions)
    res["curve"] = measure.read_metrics(run_dir / "metrics.jsonl")

    res["finetune"] = {}
    for u in finetune_units(cfg, v, recipe, res["checkpoints"]):
        res["finetune"][u["result"]] = stages.get(u["key"], u["fp"])  # finetune_all ran them

    key = f"measure:{v.name}"
    mfp = fingerprint(fp, cfg.minimal_pairs)
    m = stages.get(key, mfp)
    cached = m is not None
    if m is None:
        progress.stage(f"measure {v.name}: size, parameters, minimal pairs")
        final = res["checkpoints"][str(max(cfg.eval_fractions))]["path"]
        m = measure.measure_model(final, cfg, data)
        stages.put(key, mfp, m)
    progress.advance(1, cached=cached)
    res["measure"] = m
    return res


def side_by_side(cfg: StudyConfig, recipes: dict[str, dict], variants: dict, stages: Stages,
                 progress: Progress) -> None:
    """Training throughput (and inference latency) of all variants, timed in one process, in turns
    (study/speed.py), at the thread count each pretraining had; stored in each variant's results.
    Two-stage ELECTRA variants keep their logged rate: a step at a time cannot stand for both stages."""
    import torch

    from encoderlab.study import measure, speed

    threads = cfg.threads_per_job()
    timed = {n: r for n, r in recipes.items() if not r["objective"].get("two_stage_generator_steps")}
    finals = {n: r["checkpoints"][str(max(cfg.eval_fractions))]["path"] for n, r in variants.items()}
    dtypes = speed.latency_precisions(cfg.precision, [measure.deployed_encoder(ck).config for ck in finals.values()])
    key_fp = fingerprint(timed, finals, threads, cfg.latency, cfg.speed_seconds, dtypes)
    got = stages.get("speed", key_fp)
    cached = got is not None
    if got is None:
        progress.stage(f"speed: every variant's training step{' and inference' if cfg.latency else ''}, "
                       f"side by side")
        before = torch.get_num_threads()
        torch.set_num_threads(threads or before)
        try:
            got = {"threads": torch.get_num_threads(), "rounds": speed.ROUNDS,
                   "train": speed.training_speed(timed, seconds=cfg.speed_seconds)}
            if cfg.latency:
                encoders = {n: measure.deployed_encoder(ck) for n, ck in finals.items()}
                got["latency_ms"] = speed.inference_latency(encoders, seconds=cfg.speed_seconds / 4, dtypes=dtypes)
        finally:
            torch.set_num_threads(before)
        stages.put("speed", key_fp, got)
    progress.advance(1, cached=cached)
    for name, r in variants.items():
        if name in got["train"]:
            r["speed"] = {"threads": got["threads"], **got["train"][name]}
        if "latency_ms" in got:
            r["measure"] = {**r["measure"], "latency_ms": got["latency_ms"][name],
                            "latency_threads": got["threads"]}
