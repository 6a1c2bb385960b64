"""Run a study: prepare the data, pretrain every variant at equal FLOPs, fine-tune and measure the
checkpoints, time all variants side by side, and write the report.

Stages are recorded in ``OUT/stages.json`` with a fingerprint of everything they depend on
(study/stages.py), so a rerun skips finished stages, adding a variant runs only that variant, and an
interrupted study continues where it stopped. What it will read is checked first (study/inputs.py),
then the data stage runs (study/data_stage.py). The plan (each variant's PretrainConfig and its
fine-tunings) is study/plan.py; processes and signals study/launch.py; what is measured
study/measure.py and study/speed.py; results are typed (study/results.py) and the claims and report
read those.
"""

from __future__ import annotations

from pathlib import Path

from encoderlab.checkpoint import load_model
from encoderlab.config import ConfigError
from encoderlab.data.tokenizer import load_tokenizer
from encoderlab.device import resolve_device
from encoderlab.models.build import build_model
from encoderlab.models.config import ModelConfig
from encoderlab.objectives.base import ObjectiveConfig
from encoderlab.precision import machine_kind
from encoderlab.study import blimp, launch, measure, runs, speed
from encoderlab.study.blimp_stage import blimp_all, blimp_curve
from encoderlab.study.config import StudyConfig, VariantSpec
from encoderlab.study.data_stage import prepare_data
from encoderlab.study.executor import Executor, make_executor
from encoderlab.study.inputs import check_inputs
from encoderlab.study.lock import controller_lock
from encoderlab.study.lr import chosen, pick_learning_rates
from encoderlab.study.metrics import LATENCY_MS
from encoderlab.study.plan import (
    FinetuneUnit,
    family_of,
    finetune_grid,
    finetune_units,
    finetune_weight,
    measure_weight,
    plan,
    recipe_fingerprint,
    run_name,
)
from encoderlab.study.probes import planned_probes, probe_weight, run_probes
from encoderlab.study.progress import PRETRAIN_UNITS, Progress
from encoderlab.study.prompt import prompt_stage_weights, prompt_total_weight, run_prompting
from encoderlab.study.report import write_report
from encoderlab.study.results import Measure, Pretraining, Replica, Speed, StudyResults, VariantResult
from encoderlab.study.stages import StageKey, Stages, fingerprint
from encoderlab.train.baselines import count_baselines
from encoderlab.train.config import PretrainConfig
from encoderlab.train.init import resolve_model


def run_study(cfg: StudyConfig, *, log=print, plan_s: tuple[float, float] | None = None) -> dict:
    """``plan_s``: the plan's (pretraining, everything after) seconds (study/estimate.py), which the ETA reads."""
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg.to_yaml(out / "study.yaml")
    stages = Stages(out / "stages.json", skip_missing_weights=cfg.skip_missing_weights)
    # Units for the ETA: PRETRAIN_UNITS per variant pretraining (the bulk), smaller ones for the rest;
    # the fine-tunings' weights are set once the plan is known (plan.finetune_weight).
    pre_units = len(cfg.variants) * PRETRAIN_UNITS * cfg.pretrain_seeds
    progress = Progress(pre_units + (len(cfg.variants) + 2) * measure_weight(cfg), log,
                        planned=(pre_units, *plan_s) if plan_s else None)
    try:
        with controller_lock(out):  # a second controller on this out_dir is refused, naming this one
            return _run_stages(cfg, out, stages, progress, make_executor(cfg, out, log))
    finally:
        progress.close()


def _run_stages(cfg: StudyConfig, out: Path, stages: Stages, progress: Progress, executor: Executor) -> dict:
    # Every file the study will read, before the data stage: not after a tokenizer or the pretraining.
    progress.stage("checking the study's inputs: corpus, recipes, task files, evaluation files")
    check_inputs(cfg, out)
    executor.start(progress)  # on a cluster: a first tiny job sees out_dir, before hours of data preparation
    data = {**prepare_data(cfg, out, stages, progress), "glue_dir": cfg.glue_dir}
    recipes = plan(cfg, data, out)
    progress.total += sum(finetune_weight(cfg, recipes[v.name]) * len(list(finetune_grid(cfg, v))) * cfg.pretrain_seeds
                          for v in cfg.variants)
    progress.total += sum(probe_weight(cfg, recipes[n], kind) for kind, n, _ in planned_probes(cfg))
    progress.total += prompt_total_weight(cfg)
    if cfg.random_control and cfg.variants:  # one control fine-tuning per architecture and task
        progress.total += sum(finetune_weight(cfg, recipes[n]) * len(cfg.tasks)
                              for n in set(control_shapes(cfg, _models(cfg, recipes)).values()))
    count_recorded(cfg, recipes, stages, progress)
    check_machines(cfg, recipes, stages)
    def pretrain(names, recreate: dict[str, dict]) -> None:  # each run in one call: its units counted once
        executor.pretrain({n: recipes[n] for n in names}, stages=stages, progress=progress,
                          fingerprint=recipe_fingerprint, recreate=recreate)

    missing = runs.missing_weights(stages, recipes) if cfg.recreate_weights else {}
    recreate = {}
    if missing:  # the runs never pretrained first; then only the missing runs a stage still needs
        pretrain([n for n in recipes if n not in missing], {})
        needed = _needed_runs(cfg, recipes, data, stages, progress, executor)
        recreate = {n: rec for n, rec in missing.items() if n in needed}
        if recreate and not cfg.mixed_machines:
            runs.check_recreation(recreate, machine_kind(resolve_device(cfg.base.trainer.device)))
    pretrain([n for n in recipes if n in missing] if missing else list(recipes), recreate)
    # The stages after pretraining that run in this process (measures, minimal pairs, BLiMP) at a job's
    # threads, as the inline fine-tunings are: with `threads: 1` on a 2-core machine with one core busy,
    # torch's default 2 threads scored the demo's 300 minimal pairs in 44.5 s against 8.5 s at 1 thread.
    with launch.at_threads(cfg.threads_per_job(1)):
        results = _after_pretraining(cfg, recipes, data, stages, progress, executor)
    progress.stage("writing the report")
    report = write_report(cfg, results, out)
    progress.advance(measure_weight(cfg))
    progress.stage(f"done: {out / 'report.md'}")
    return report


def _needed_runs(cfg: StudyConfig, recipes: dict[str, PretrainConfig], data: dict, stages: Stages,
                 progress: Progress, executor: Executor) -> set[str]:
    """The runs whose weights a stage still to compute needs (what recreate_weights pretrains again;
    before, every run with its folder missing was, 6 of a part's 15 for nothing on a fresh machine).
    Found by passing over the stages after pretraining with missing weights skipped
    (runs.have_weights): what needs none of them is computed and recorded (the real pass reads it),
    the rest names its runs. The ETA counts that pass's work once (Progress.rehearsal)."""
    before = len(stages.skipped)
    stages.skip_missing_weights = True
    try:
        with progress.rehearsal():
            progress.stage("finding the runs whose weights the stages still to compute need")
            _after_pretraining(cfg, recipes, data, stages, progress, executor)
    finally:
        stages.skip_missing_weights = cfg.skip_missing_weights
    left = stages.skipped[before:]
    del stages.skipped[before:]
    return runs.needed_runs(left)


def _after_pretraining(cfg: StudyConfig, recipes: dict[str, PretrainConfig], data: dict, stages: Stages,
                       progress: Progress, executor: Executor) -> StudyResults:
    """Every stage after pretraining: learning-rate picks, fine-tunings, baselines, controls, measures,
    the side-by-side speed stage, probes and prompting."""
    progress.new_phase()
    if cfg.finetune_lrs:  # chosen on held-out training data before any fine-tuning the claims read
        data = {**data, "learning_rates": pick_learning_rates(cfg, recipes, stages, data, progress)}
    finetune_all(cfg, recipes, data, stages, progress, executor)
    blimp_all(cfg, recipes, stages, data, progress, executor)
    results = StudyResults(config=cfg.to_dict(), data=data, baselines=task_baselines(cfg, data, stages, progress),
                           mlm_baselines=mlm_baselines(recipes, stages, progress),
                           controls=random_control(cfg, recipes, data, stages, progress),
                           variants={v.name: run_variant(cfg, v, recipes, data, stages, progress)
                                     for v in cfg.variants},
                           skipped=stages.skipped)  # the same list: the probes' below join it
    side_by_side(cfg, {v.name: recipes[v.name] for v in cfg.variants}, results.variants, stages, progress)
    run_probes(cfg, recipes, results.variants, data, stages, progress)
    run_prompting(cfg, recipes, results.variants, data, stages, progress, executor)
    return results


def count_recorded(cfg: StudyConfig, recipes: dict[str, PretrainConfig], stages: Stages, progress: Progress) -> None:
    """Count the fine-tunings and prompts on record as done before the pretrainings start: the bulk of
    what follows them, and without this the ETA prices it at their rate while a study pretrains only
    an added variant's runs, or a part its runs again."""
    for v in cfg.variants:
        for seed in range(cfg.pretrain_seeds):
            run = run_name(v.name, seed)
            weight = finetune_weight(cfg, recipes[run])  # builds the model config: once a run
            for frac, task, unshared in finetune_grid(cfg, v):
                key = StageKey.finetune(run, task.name, frac, unshared)
                if stages.recorded(key):
                    progress.on_record(str(key), weight)
    for key, weight in prompt_stage_weights(cfg).items():
        if stages.recorded(key):
            progress.on_record(key, weight)


def check_machines(cfg: StudyConfig, recipes: dict[str, PretrainConfig], stages: Stages) -> None:
    """Stop before pretraining a variant here when its other runs computed on another kind of machine
    (its seeds are replicates: a kind's precision and kernels would enter their spread)."""
    if cfg.mixed_machines:
        return
    here = machine_kind(resolve_device(cfg.base.trainer.device))
    for v in cfg.variants:
        names = [run_name(v.name, seed) for seed in range(cfg.pretrain_seeds)]
        todo = [n for n in names if stages.get(StageKey.pretrain(n), recipe_fingerprint(recipes[n])) is None]
        if not todo:
            continue
        elsewhere = {}
        for n in names:
            for kind in runs.curve(stages, n, recipes[n]).machine_kinds():
                if kind not in (here, "not recorded"):
                    elsewhere.setdefault(kind, []).append(n)
        if elsewhere:
            ran = "; ".join(f"{', '.join(there)} on {kind!r}" for kind, there in elsewhere.items())
            raise ConfigError(f"variant {v.name!r}: {ran}, and {', '.join(todo)} would run here, on {here!r}. A "
                              "variant's pretraining runs are its replicates, so they run on one kind of machine: "
                              "finish it on one of that kind, or set mixed_machines: true in the study (the report "
                              "then names the variants that mixed)")


def task_baselines(cfg: StudyConfig, data: dict, stages: Stages, progress: Progress) -> dict:
    """Per task the one-class scores and majority class (measure.task_baselines), the bag-of-words
    baseline and the scikit-learn n-gram baseline (eval/probe.py, the strong one), each a stage of its
    own per task (each fits a model: seconds a task at 4,000 examples)."""
    out = measure.task_baselines(cfg, data)
    ft = {k: x for k, x in cfg.finetune.to_dict().items() if k != "device"}
    for task in cfg.tasks:
        fp = fingerprint(task.to_dict(), ft, data.get("glue_dir"), data.get("demo_task"))
        out[task.name]["bow"] = stages.cached(StageKey.bow(task.name), fp,
                                              lambda task=task: measure.bow_baseline(task, cfg, data),
                                              progress=progress, label=f"bag-of-words baseline on {task.name}")
        out[task.name]["ngram"] = stages.cached(StageKey.ngram(task.name), fp,
                                                lambda task=task: measure.ngram_baseline(task, cfg, data),
                                                progress=progress, label=f"n-gram baseline on {task.name}")
    return out


def control_shapes(cfg: StudyConfig, models: dict[str, ModelConfig]) -> dict[str, str]:
    """{variant: the variant whose random-init control stands for it}: variants whose fine-tuned encoder
    (an ELECTRA's discriminator) has one config share a control, named by the first of them, the bert
    role (else the first variant) first. ``models``: each variant's resolved model (from its recipe,
    so a clone without the weights finds the same controls)."""
    main = cfg.roles.bert if cfg.variant(cfg.roles.bert or "") else cfg.variants[0].name
    shapes: dict[str, str] = {}
    out = {}
    for name in [main] + [v.name for v in cfg.variants if v.name != main]:
        encoder = models[name].encoder
        shape = {**encoder.to_dict(), "embedding_size": encoder.emb_size}  # unset means the hidden size
        out[name] = shapes.setdefault(fingerprint(shape), name)
    return out


def _models(cfg: StudyConfig, recipes: dict[str, PretrainConfig]) -> dict[str, ModelConfig]:
    return {v.name: resolve_model(recipes[v.name].model, recipes[v.name].init, cfg.vocab_size) for v in cfg.variants}


def random_control(cfg: StudyConfig, recipes: dict[str, PretrainConfig], data: dict, stages: Stages,
                   progress: Progress) -> dict:
    """Each architecture the variants fine-tune, from fresh weights, on every task with the study's
    seeds (and on BLiMP dev): the bert role's (else the first variant's) as the main control, every
    other shape's under ``shapes`` with ``of`` saying which variants it stands for (an ALBERT is
    compared with fresh ALBERT weights, not BERT's); {} when the study asks for no control."""
    if not cfg.random_control or not cfg.variants:
        return {}
    of = control_shapes(cfg, _models(cfg, recipes))
    main = next(iter(of))
    causal: dict[str, str] = {}  # {control: the first causal LM variant it stands for}
    for n, c in of.items():
        if blimp.causal(cfg.variant(n).objective.kind):
            causal.setdefault(c, n)
    out = {"variant": main, **_control(cfg, recipes, main, None, data, stages, progress, causal.get(main))}
    others = list(dict.fromkeys(c for c in of.values() if c != main))
    if others:
        out["shapes"] = {n: _control(cfg, recipes, n, n, data, stages, progress, causal.get(n)) for n in others}
        out["of"] = {v: c for v, c in of.items() if c != main}
    return out


def _control(cfg: StudyConfig, recipes: dict[str, PretrainConfig], name: str, shape: str | None, data: dict,
             stages: Stages, progress: Progress, causal: str | None = None) -> dict:
    """{"tasks": ..., "blimp": ...} of variant ``name``'s architecture from fresh weights (stage keys
    under ``shape``, None for the main control); ``causal``: a causal LM variant it stands for, whose
    network from fresh weights is scored on BLiMP left to right too (blimp.CAUSAL_CONTROL). That one is
    read from the causal variant's checkpoint: the network it compares with (a GPT-BERT of the same
    shape, whose head reads t - 1, would be another), and the weights a part recreates anyway."""
    recipe = recipes[name]

    def architecture(run: str) -> str:  # the checkpoint a control reads its architecture from
        return runs.checkpoints(stages, run, recipes[run], cfg.budget_flops, cfg.eval_fractions)[
            max(cfg.finetune_fractions)].path

    path = architecture(name)  # only its architecture is used

    def here(what: str):  # the architecture is read from the checkpoint: its weights must be here
        return lambda: runs.have_weights(stages, {name: path}, what)

    ft = {k: x for k, x in cfg.finetune.to_dict().items() if k != "device"}
    tasks = {}
    for task in cfg.tasks:
        fp = fingerprint("random", recipe.model.to_dict(), task.to_dict(), ft, cfg.seeds)
        label = f"random-init control ({name}'s architecture) on {task.name} ({cfg.seeds} seeds)"
        got = stages.cached(StageKey.control(task.name, shape), fp,
                            lambda task=task: measure.finetune_checkpoint(path, task, cfg, data, init="random"),
                            progress=progress, label=label, ready=here(label))
        if got is not None:
            tasks[task.name] = got
    out = {"tasks": tasks}
    if cfg.blimp:  # the same architecture from fresh weights, zero-shot
        import torch

        def score_fresh(ck: str, left_to_right: bool) -> dict:
            torch.manual_seed(0)
            model = build_model(load_model(ck).config).eval()
            return blimp.score(model, load_tokenizer(data["tokenizer"]),
                               blimp.load_pairs(cfg.blimp, cfg.blimp_pairs_per_paradigm), causal=left_to_right)

        ways = [("blimp", name, path, False)]
        if causal:
            ways.append((blimp.CAUSAL_CONTROL, causal, architecture(causal), True))
        for key, of, ck, left_to_right in ways:
            fp = fingerprint("random", recipes[of].model.to_dict(), cfg.blimp, cfg.blimp_pairs_per_paradigm,
                             *(["causal"] if left_to_right else []))  # the PLL control's stays as it was
            label = (f"random-init control ({name}'s architecture) on {blimp.label(cfg.blimp)}"
                     + (f" left to right ({of}'s network)" if left_to_right else ""))
            got = stages.cached(StageKey.control_blimp(shape, left_to_right), fp,
                                lambda ck=ck, left_to_right=left_to_right: score_fresh(ck, left_to_right),
                                progress=progress, label=label,
                                ready=lambda ck=ck, of=of, label=label: runs.have_weights(stages, {of: ck}, label))
            if got is not None:
                out[key] = got
    return out


def mlm_baselines(recipes: dict[str, PretrainConfig], stages: Stages, progress: Progress) -> dict:
    """Unigram and bigram accuracy at the held-out evaluation's masked positions, which are the same
    for every variant (train/baselines.py): the scale on which the report says who left the plateau."""
    first = next(iter(recipes.values()))
    recipe = first.replace(objective=ObjectiveConfig(kind="mlm"),
                           data=first.data.replace(short_seq_len=None, short_seq_steps=0))  # held-out: full length
    data = {k: x for k, x in first.data.to_dict().items() if k not in ("short_seq_steps", "short_seq_len")}
    fp = fingerprint(data, first.trainer.seed)
    return stages.cached(StageKey.mlm_baselines(), fp, lambda: count_baselines(recipe), progress=progress,
                         label="held-out baselines: unigram and bigram counts")


# ---- fine-tuning ---------------------------------------------------------------------------------
def finetune_all(cfg: StudyConfig, recipes: dict[str, PretrainConfig], data: dict, stages: Stages,
                 progress: Progress, executor: Executor) -> None:
    """Every fine-tuning not done yet: in this process with one job, else up to finetune_jobs
    worker processes at once (or a SLURM job each), each stored as it finishes so an interrupted study
    keeps what it got."""
    todo: list[FinetuneUnit] = []
    for v in cfg.variants:
        for seed in range(cfg.pretrain_seeds):
            run = run_name(v.name, seed)
            cks = runs.checkpoints(stages, run, recipes[run], cfg.budget_flops, cfg.eval_fractions)
            for u in finetune_units(cfg, v, recipes[run], cks, run, lrs_of(cfg, recipes[v.name], data)):
                if stages.get(_stage(u), u.fingerprint) is None:
                    todo.append(u)
                else:
                    progress.advance(u.weight, cached=True, key=str(_stage(u)))
    todo = [u for u in todo if runs.have_weights(stages, {u.variant: u.checkpoint}, f"fine-tuning {u.label}")]
    jobs = min(cfg.finetune_jobs or cfg.pretrain_jobs, len(todo))

    def store(done: tuple[FinetuneUnit, dict]) -> None:
        u, r = done
        stages.put(_stage(u), u.fingerprint, r)
        progress.advance(u.weight, key=str(_stage(u)))
        if jobs > 1:
            scores = ", ".join(f"{m} {s['median']:.3f} ± {s['std']:.3f}" for m, s in r["summary"].items())
            progress.stage(f"fine-tuned {u.label}: {scores} (median ± std of {cfg.seeds} seeds)")

    if jobs > 1 or cfg.executor != "local":
        progress.stage(f"fine-tune {len(todo)} checkpoint-task pairs, {jobs} at once ({cfg.seeds} seeds each): "
                       + ", ".join(u.label for u in todo[:jobs]) + (", ..." if len(todo) > jobs else ""))
    executor.map(_finetune_unit, [(u, cfg, data) for u in todo], keys=[(str(_stage(u)), u.fingerprint) for u in todo],
                 jobs=jobs, on_result=store, progress=progress,
                 announce=lambda item: progress.stage(f"fine-tune {item[0].label} ({cfg.seeds} seeds)"),
                 describe=lambda n: f"fine-tuning: {n} of {len(todo)} checkpoint-task pairs done, {jobs} at once")


def _stage(u: FinetuneUnit) -> StageKey:
    """A fine-tuning's stage key (the same string as plan.py's FinetuneUnit.stage)."""
    return StageKey.finetune(u.variant, u.key.task, u.key.fraction, u.key.unshared)


def _finetune_unit(args: tuple) -> tuple[FinetuneUnit, dict]:
    u, cfg, data = args
    return u, measure.finetune_checkpoint(u.checkpoint, u.task, cfg, data, unshare=u.key.unshared,
                                          learning_rate=u.learning_rate)


# ---- one variant ---------------------------------------------------------------------------------
def run_variant(cfg: StudyConfig, v: VariantSpec, recipes: dict[str, PretrainConfig], data: dict, stages: Stages,
                progress: Progress) -> VariantResult:
    """Checkpoints, curves, fine-tuning and measurements of one pretrained variant (its seed-0 run; the
    further pretraining seeds' checkpoints, curves and fine-tunings as replicas)."""
    recipe = recipes[v.name]
    run_dir = Path(recipe.trainer.run_dir)
    fp = recipe_fingerprint(recipe)
    res = VariantResult(name=v.name, spec=v.to_dict(), run_dir=str(run_dir),
                        pretrain=Pretraining.from_json(stages.get(StageKey.pretrain(v.name), fp)),
                        checkpoints=runs.checkpoints(stages, v.name, recipe, cfg.budget_flops, cfg.eval_fractions),
                        curve=runs.curve(stages, v.name, recipe))
    for u in finetune_units(cfg, v, recipe, res.checkpoints, lrs=lrs_of(cfg, recipe, data)):
        if (got := stages.get(_stage(u), u.fingerprint)) is not None:  # finetune_all ran it (or left it out)
            res.finetune[u.key] = got
    res.replicas = [replica(cfg, v, seed, recipes[run_name(v.name, seed)], stages, lrs_of(cfg, recipe, data), data,
                            progress) for seed in range(1, cfg.pretrain_seeds)]

    final = res.checkpoints[max(cfg.eval_fractions)].path
    label = f"measure {v.name}: size, parameters, minimal pairs"
    m = stages.cached(StageKey.measure(v.name), fingerprint(fp, cfg.minimal_pairs),
                      lambda: measure.measure_model(final, cfg, data), progress=progress, label=label,
                      weight=measure_weight(cfg), ready=lambda: runs.have_weights(stages, {v.name: final}, label))
    res.measure = Measure.from_json(m or {})
    if cfg.minimal_pairs != "off":
        res.measure.zeroshot = zeroshot_curve(cfg, v, res, data, stages, fp, progress)
    if cfg.blimp:
        res.measure.blimp = blimp_curve(cfg, v.name, res.checkpoints, data, stages, fp, progress,
                                        causal=blimp.causal(v.objective.kind))
    return res


def lrs_of(cfg: StudyConfig, recipe: PretrainConfig, data: dict) -> dict[str, float]:
    """{task: learning rate} chosen for the recipe's family (study/lr.py); {} when the study chose none."""
    if not data.get("learning_rates"):
        return {}
    return chosen(data, family_of(cfg, recipe))


def replica(cfg: StudyConfig, v: VariantSpec, seed: int, recipe: PretrainConfig, stages: Stages,
            lrs: dict[str, float] | None = None, data: dict | None = None, progress: Progress | None = None) -> Replica:
    """The checkpoints, curves and fine-tunings of variant ``v``'s run from pretraining seed ``seed``."""
    run_dir = Path(recipe.trainer.run_dir)
    rep = Replica(seed=seed, run_dir=str(run_dir),
                  checkpoints=runs.checkpoints(stages, run_name(v.name, seed), recipe, cfg.budget_flops,
                                               cfg.eval_fractions),
                  curve=runs.curve(stages, run_name(v.name, seed), recipe))
    for u in finetune_units(cfg, v, recipe, rep.checkpoints, run_name(v.name, seed), lrs):
        if (got := stages.get(_stage(u), u.fingerprint)) is not None:
            rep.finetune[u.key] = got
    if cfg.blimp and data is not None:  # the last checkpoint only: the paired comparisons read it
        last = max(rep.checkpoints)
        rep.measure.blimp = blimp_curve(cfg, run_name(v.name, seed), {last: rep.checkpoints[last]}, data, stages,
                                        recipe_fingerprint(recipe), progress, causal=blimp.causal(v.objective.kind))
    return rep


def zeroshot_curve(cfg: StudyConfig, v: VariantSpec, res: VariantResult, data: dict, stages: Stages, fp: str,
                   progress: Progress) -> dict:
    """Minimal pairs at every evaluated checkpoint (held-out MLM accuracy and discriminator AUC are
    already in the pretraining's eval records), so the report draws learning curves against FLOPs as
    the BabyLM pipeline does. {fraction: {"flops", "step", "minimal_pairs"}}; one stage each."""
    out = {}
    final = max(cfg.eval_fractions)
    for frac, ck in sorted(res.checkpoints.items()):
        def score(frac: float = frac, ck=ck) -> dict:
            if frac == final and res.measure.minimal_pairs is not None:
                return res.measure.minimal_pairs  # the measure stage scored this same checkpoint
            progress.stage(f"zero-shot {v.name} at {frac:g} of the budget: minimal pairs")
            return measure.minimal_pairs(load_model(ck.path).eval(), cfg, data, ck.path)

        what = f"minimal pairs: {v.name} at {frac:g} of the budget"
        got = stages.cached(StageKey.zeroshot(v.name, frac), fingerprint(fp, ck.path, cfg.minimal_pairs), score,
                            ready=lambda frac=frac, ck=ck, what=what: frac == final and res.measure.minimal_pairs
                            is not None or runs.have_weights(stages, {v.name: ck.path}, what))
        if got is not None:
            out[f"{frac:g}"] = {"flops": ck.flops, "step": ck.step, "minimal_pairs": got}
    return out


def side_by_side(cfg: StudyConfig, recipes: dict[str, PretrainConfig], variants: dict[str, VariantResult],
                 stages: Stages, progress: Progress) -> None:
    """Training throughput (and inference latency) of all variants, timed in one process, in turns
    (study/speed.py), at the thread count each pretraining had; stored in each variant's results.
    Two-stage ELECTRA variants keep their logged rate: a step at a time cannot stand for both stages."""
    import torch

    threads = cfg.threads_per_job()
    timed = {n: r for n, r in recipes.items() if not r.objective.two_stage_generator_steps}
    finals = {n: r.checkpoints[max(cfg.eval_fractions)].path for n, r in variants.items()}
    # Latency is timed on each recipe's deployed architecture (measure.deployed_architecture), its
    # precisions follow the widest encoder: nothing here needs a run's weights.
    models = {n: resolve_model(r.model, r.init, cfg.vocab_size) for n, r in recipes.items()}
    widths = [m.encoder for m in models.values()]
    dtypes = speed.latency_precisions(cfg.base.trainer.precision, widths) if cfg.latency and widths else ()
    key_fp = fingerprint({n: r.to_dict() for n, r in timed.items()}, finals, threads, cfg.latency,
                         cfg.speed_seconds, dtypes)

    def time_all() -> dict:
        before = torch.get_num_threads()
        torch.set_num_threads(threads or before)
        try:
            got = {"threads": torch.get_num_threads(), "rounds": speed.ROUNDS,
                   "train": speed.training_speed(timed, seconds=cfg.speed_seconds)}
            if cfg.latency:
                encoders = {n: measure.deployed_architecture(models[n]) for n in variants}
                got[LATENCY_MS] = speed.inference_latency(encoders, seconds=cfg.speed_seconds / 4, dtypes=dtypes)
            return got
        finally:
            torch.set_num_threads(before)

    got = stages.cached(StageKey.speed(tuple(variants)), key_fp, time_all, progress=progress,
                        weight=measure_weight(cfg),
                        label=f"speed: every variant's training step{' and inference' if cfg.latency else ''}, "
                              f"side by side")
    for name, r in variants.items():
        if name in got["train"]:
            r.speed = Speed.from_json({"threads": got["threads"], **got["train"][name]})
        if LATENCY_MS in got:
            r.measure.latency_ms, r.measure.latency_threads = got[LATENCY_MS][name], got["threads"]
