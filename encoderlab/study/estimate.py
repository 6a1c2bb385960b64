"""A study priced before compute: ``encoderlab study FILE --plan`` (and the first lines of every run).

A newcomer's study took 23 minutes and told them, at the end, what a plan could have said at the
start (issue 51). The plan counts the work (pretraining runs, fine-tunings, the random-init control's,
the learning-rate picks) and times it on this machine, from the real steps:

- a pretraining run: each variant's own recipe, built as its run will be (model, objective,
  precision, optimizer, the study's threads a job) on synthetic tokens of the study's vocabulary;
  one step at full length and one at the short length, timed as a time budget times them
  (Trainer.seconds_per_step), times the steps the FLOPs budget buys in each phase, plus the run's
  setup (building the trainer, timed) and a process start (timed once);
- a fine-tuning: one classifier step of the variant's encoder at the task's estimated token length
  (words x 1.3 + 3 a text; characters for Chinese and Japanese), times the steps its capped train
  split and epochs make, plus one forward pass over its dev split per epoch;
- minimal pairs and BLiMP, by pseudo-log-likelihood: a timed forward pass of 128 masked copies, times
  the copies (one per token of every sentence) at each checkpoint scored;
- the side-by-side speed stage from speed_seconds;
- jobs side by side as the study runs them (pretrain_jobs, finetune_jobs).

Prompting, the linear probes, the n-gram baseline and the data stage (tokenizer training and the
token store) are not timed; the plan names them. A running study's ETA reads the plan's seconds,
corrected by how its work so far ran against them (study/progress.py).
"""

from __future__ import annotations

import functools
import json
import math
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from encoderlab.eval.intrinsic import read_minimal_pairs
from encoderlab.eval.probe import is_cjk
from encoderlab.eval.tasks import load_task
from encoderlab.models.build import build_model
from encoderlab.models.config import ModelConfig
from encoderlab.precision import machine_kind
from encoderlab.study import blimp
from encoderlab.study.config import StudyConfig
from encoderlab.study.demo_corpus import build_cached
from encoderlab.study.inputs import planned_data
from encoderlab.study.measure import DEMO_TASK, task_spec
from encoderlab.study.plan import family_model, finetune_fractions, finetune_grid, run_name, variant_recipe
from encoderlab.study.power import components, seed_scores
from encoderlab.study.results import StudyResults
from encoderlab.train.config import InitConfig, SyntheticConfig
from encoderlab.train.flops import planned_step_flops
from encoderlab.train.init import resolve_model
from encoderlab.train.trainer import Trainer

TOKENS_PER_WORD = 1.3  # WordPiece pieces per whitespace word on English text (a stated estimate)


@dataclass(frozen=True, kw_only=True)
class StageCost:
    stage: str
    jobs: int  # separate jobs (processes, or fine-tunings of one seed)
    seconds: float  # all of them, one after another, on this machine
    parallel: int  # side by side
    how: str  # what the seconds were timed or counted from

    @property
    def wall_s(self) -> float:
        return self.seconds / max(1, min(self.parallel, self.jobs))


@dataclass(frozen=True, kw_only=True)
class StudyEstimate:
    machine: str
    stages: tuple[StageCost, ...]
    untimed: tuple[str, ...]
    not_run: str  # the claims that will not run, one line ("" when all run)
    power: tuple[str, ...]  # the detectable difference per task, from a pilot's variance

    @property
    def wall_s(self) -> float:
        return sum(s.wall_s for s in self.stages)

    @property
    def split_s(self) -> tuple[float, float]:
        """(pretraining, everything after) wall-clock seconds: what a running study's ETA reads."""
        pre = sum(s.wall_s for s in self.stages if s.stage == "pretraining")
        return pre, self.wall_s - pre

    def lines(self) -> list[str]:
        out = [f"plan on {self.machine}:"]
        for s in self.stages:
            side = f", {min(s.parallel, s.jobs)} side by side" if min(s.parallel, s.jobs) > 1 else ""
            out.append(f"  {s.stage}: {s.jobs} job(s), ~{_clock(s.wall_s)}{side} ({s.how})")
        out.append(f"  estimated wall-clock: ~{_clock(self.wall_s)} for the timed stages"
                   + (f"; not timed: {', '.join(self.untimed)}" if self.untimed else ""))
        out += [f"  {line}" for line in self.power]
        if self.not_run:
            out.append(f"  {self.not_run}")
        return out


def _clock(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    return f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h"


def estimate(cfg: StudyConfig, *, notes: list[str], pilot: Path | None = None, log=None) -> StudyEstimate:
    """The study's work, counted and timed on this machine (seconds per stage, the total), the
    detectable difference per task from ``pilot``'s variance, and ``notes`` (study/roles.check_roles)
    folded into one line."""
    threads = cfg.threads_per_job() or torch.get_num_threads()
    kept = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        start_s = _process_start()
        runs, seconds = {}, 0.0
        for v in cfg.variants:
            runs[v.name] = _pretrain_seconds(cfg, v) + start_s
            seconds += runs[v.name] * cfg.pretrain_seeds
        stages = [StageCost(stage="pretraining", jobs=len(cfg.variants) * cfg.pretrain_seeds, seconds=seconds,
                            parallel=cfg.pretrain_jobs,
                            how=f"timed steps x the steps {cfg.budget_flops:.2g} FLOPs buy, {threads} thread(s) a job")]
        stages += _finetune_costs(cfg, threads)
        stages += _scoring_costs(cfg)
    finally:
        torch.set_num_threads(kept)
    untimed = [name for name, on in (("prompting", cfg.prompt_tasks), ("probes and the n-gram baseline", cfg.tasks),
                                     ("the data stage (tokenizer, token store)", not cfg.store)) if on]
    return StudyEstimate(machine=_machine(threads), stages=tuple(stages), untimed=tuple(untimed),
                         not_run=not_run_line(notes), power=tuple(power_lines(cfg, pilot)))


def _machine(threads: int) -> str:

    return f"{machine_kind(torch.device('cpu'))}, {threads} thread(s) a job"


@functools.lru_cache(maxsize=1)
def _process_start() -> float:
    """Seconds for a fresh Python to import the trainer: what each pretraining process pays first
    (timed once a process)."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import encoderlab.train.trainer"], check=True, capture_output=True)
    return time.perf_counter() - t


def _pretrain_seconds(cfg: StudyConfig, v) -> float:
    """One pretraining run of variant ``v``: its steps at the short and full length, timed, plus setup."""

    with tempfile.TemporaryDirectory() as tmp:
        placeholder = {"store": str(Path(tmp) / "store"), "tokenizer": str(Path(tmp) / "tokenizer")}
        recipe = variant_recipe(cfg, v, placeholder, Path(tmp) / run_name(v.name, 0), vocab_size=cfg.vocab_size)
        data = recipe.data.replace(kind="synthetic", synthetic=SyntheticConfig(vocab_size=cfg.vocab_size))
        recipe = recipe.replace(data=data, trainer=recipe.trainer.replace(resume="never"))
        t0 = time.perf_counter()
        trainer = Trainer(recipe)
        setup = time.perf_counter() - t0
        d, steps = trainer.cfg.data, trainer.budget.steps
        full = planned_step_flops(trainer.model_cfg, trainer.ocfg, d.batch_size, d.seq_len)
        t_full = trainer.seconds_per_step()
        short = min(d.short_seq_steps, steps) if d.short_seq_len else 0
        t_short = trainer.seconds_per_step(d.short_seq_len) if short else 0.0
        f_short = (planned_step_flops(trainer.model_cfg, trainer.ocfg, d.short().batch_size, d.short_seq_len)
                   if short else 0.0)
        rest = max(0.0, (cfg.budget_flops - short * f_short) / full)
        evals = len(cfg.eval_fractions) * d.eval_batches * t_full / 3  # forward only
        return setup + short * t_short + rest * t_full + evals


def _finetune_costs(cfg: StudyConfig, threads: int) -> list[StageCost]:
    """The fine-tunings (every run x task x fraction x seed), the random-init control's (one architecture
    of each shape), and the learning-rate picks, each from a timed classifier step."""
    if not cfg.tasks:
        return []


    tasks = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = planned_data(cfg, Path(cfg.out_dir))
        if any(ref.name == DEMO_TASK for ref in cfg.tasks):  # the data stage makes it: made here too (cached)

            build_cached(Path(tmp) / "demo")
            data = {**data, "demo_task": str(Path(tmp) / "demo" / "task")}
        for ref in cfg.tasks:
            spec, data_dir = task_spec(ref, data)
            tasks[ref.name] = _task_shape(cfg, load_task(spec, data_dir))
    step_s: dict[tuple[str, int], float] = {}
    fine, lr_pick, control, jobs = 0.0, 0.0, 0.0, 0
    shapes = {}
    for v in cfg.variants:
        enc = _encoder(cfg, v)
        shapes.setdefault(enc, v.name)
        for _frac, task, _unshared in finetune_grid(cfg, v):
            one = _finetune_seconds(enc, tasks[task.name], cfg, step_s)
            fine += one * cfg.seeds * cfg.pretrain_seeds
            jobs += cfg.seeds * cfg.pretrain_seeds
            if cfg.finetune_lrs and _frac == max(finetune_fractions(cfg, v.name)):
                lr_pick += one * len(cfg.finetune_lrs)  # on the held-out share: a little less, counted as one
    if cfg.random_control:
        for enc in shapes:
            control += sum(_finetune_seconds(enc, shape, cfg, step_s) for shape in tasks.values()) * cfg.seeds
    par = cfg.finetune_jobs or cfg.pretrain_jobs
    how = (f"a timed classifier step x the steps of each task's train split (capped at "
           f"{cfg.finetune.max_train_examples or 'all'}), {threads} thread(s) a job")
    out = [StageCost(stage="fine-tuning", jobs=jobs, seconds=fine, parallel=par, how=how)]
    if lr_pick:
        out.append(StageCost(stage="learning-rate picks", jobs=len(cfg.variants) * len(cfg.finetune_lrs),
                             seconds=lr_pick, parallel=par, how=f"{len(cfg.finetune_lrs)} rates a run and task"))
    if control:
        out.append(StageCost(stage="random-init control", jobs=len(shapes) * len(tasks) * cfg.seeds,
                             seconds=control, parallel=par, how="one architecture of each shape"))
    return out


@dataclass(frozen=True)
class _Shape:
    train: int  # examples a fine-tuning trains on
    dev: int
    length: int  # estimated tokens an example (capped at max_length)
    epochs: float
    labels: int


def _task_shape(cfg: StudyConfig, data) -> _Shape:

    texts = [e.text_a + (" " + e.text_b if e.text_b else "") for e in data.train[:2000]]
    cjk = is_cjk(texts)
    mean = sum(len(t.replace(" ", "")) if cjk else len(t.split()) * TOKENS_PER_WORD for t in texts) / max(1, len(texts))
    cap = cfg.finetune.max_train_examples
    n = len(data.train) if cap is None else min(len(data.train), cap)
    dev = sum(len(x) for x in data.evals.values())
    if cfg.finetune.max_eval_examples is not None:
        dev = min(dev, cfg.finetune.max_eval_examples)
    epochs = cfg.finetune.epochs if cfg.finetune.epochs is not None else data.spec.epochs
    return _Shape(n, dev, min(cfg.finetune.max_length, math.ceil(mean + 3)), epochs, max(2, data.num_labels))


def _encoder(cfg: StudyConfig, v):
    """The encoder a variant's checkpoint fine-tunes (the discriminator's, for ELECTRA)."""

    m = resolve_model(family_model(cfg.base.model, v.model), InitConfig(), cfg.vocab_size)
    return m.family, m.encoder


def _finetune_seconds(enc, shape: _Shape, cfg: StudyConfig, cache: dict) -> float:
    """One fine-tuning (one seed): epochs x steps of a timed classifier step, plus a dev pass an epoch."""
    key = (enc, shape.length)
    if key not in cache:
        cache[key] = _time_classifier_step(enc, cfg.finetune.batch_size, shape.length, shape.labels)
    steps = shape.epochs * math.ceil(shape.train / cfg.finetune.batch_size)
    dev = math.ceil(shape.epochs) * math.ceil(shape.dev / cfg.finetune.batch_size) * cache[key] / 3
    return steps * cache[key] + dev


def _scoring_costs(cfg: StudyConfig) -> list[StageCost]:
    """Minimal pairs at every evaluated checkpoint of each variant, BLiMP at a run's checkpoints and
    its random-init twin's, by pseudo-log-likelihood: one masked copy of a sentence per scored token,
    128 copies a batch (eval/intrinsic.py); and the side-by-side speed stage, from speed_seconds."""
    out = []
    step_s: dict = {}
    shapes = {_encoder(cfg, v): v for v in cfg.variants}
    if cfg.minimal_pairs != "off" and cfg.variants:
        if cfg.minimal_pairs:

            pairs = read_minimal_pairs(cfg.minimal_pairs)
            words = sum(len(p["sentence_good"].split()) for p in pairs) / max(1, len(pairs))
        else:  # derived from held-out text: 300 pairs of 6 to 25 words (study/measure.py)
            pairs, words = [None] * 300, 15.5
        each = sum(_pll_seconds(shape, len(pairs), words, step_s) for shape in shapes) / len(shapes)
        n = len(cfg.variants) * len(cfg.eval_fractions)
        out.append(StageCost(stage="minimal pairs", jobs=n, seconds=n * each, parallel=1,
                             how=f"{len(pairs)} pairs a checkpoint, a timed forward pass of 128 masked copies"))
    if cfg.blimp:

        pairs = blimp.load_pairs(cfg.blimp, cfg.blimp_pairs_per_paradigm)
        words = sum(len(p["sentence_good"].split()) for p in pairs) / max(1, len(pairs))
        each = sum(_pll_seconds(shape, len(pairs), words, step_s) for shape in shapes) / len(shapes)
        n = len(cfg.variants) * (len(cfg.eval_fractions) + cfg.pretrain_seeds - 1) + len(shapes)
        out.append(StageCost(stage="BLiMP", jobs=n, seconds=n * each, parallel=1,
                             how=f"{len(pairs)} pairs a checkpoint and the random-init twins"))
    if cfg.variants and cfg.speed_seconds:
        n = len(cfg.variants)
        out.append(StageCost(stage="speed stage", jobs=n, seconds=2 * 5 * cfg.speed_seconds * n, parallel=1,
                             how="5 rounds of training and inference, speed_seconds each"))
    return out


def _pll_seconds(family_enc, pairs: int, words: float, cache: dict) -> float:
    """Pseudo-log-likelihood of ``pairs`` x 2 sentences of ``words`` words: a masked copy per token."""
    tokens = math.ceil(words * TOKENS_PER_WORD + 2)
    key = (family_enc, tokens, "forward")
    if key not in cache:
        cache[key] = _time_classifier_step(family_enc, 128, tokens, 2, backward=False)
    return 2 * pairs * tokens / 128 * cache[key]


def _time_classifier_step(family_enc, batch: int, length: int, labels: int, *, backward: bool = True) -> float:
    """Seconds of one fine-tuning step (forward, loss, backward, AdamW; or the forward pass alone, without
    gradients): one warm-up, the fastest of three."""

    family, enc = family_enc
    model = build_model(ModelConfig(family=family, head="sequence_classification", encoder=enc, num_labels=labels))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(5, enc.vocab_size, (batch, length))
    mask = torch.ones_like(ids)
    target = torch.randint(0, labels, (batch,))
    times = []
    for _ in range(4):
        t = time.perf_counter()
        with torch.set_grad_enabled(backward):
            loss = torch.nn.functional.cross_entropy(model(ids, mask), target)
        if backward:
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t)
    return min(times[1:])


def not_run_line(notes: list[str]) -> str:
    """The "claim N will not run" notes as one line: the claim numbers, then what the rest said."""

    claims = [m.group(1) for n in notes if (m := re.match(r"claim (\w+) will not run", n))]
    other = [n for n in notes if not re.match(r"claim \w+ will not run", n)]
    line = f"claims {', '.join(claims)} will not run (their variants or probes are not in this study)" if claims else ""
    return "; ".join([line, *other]) if other else line


def power_lines(cfg: StudyConfig, pilot: Path | None) -> list[str]:
    """Per task, the difference this design (pretrain_seeds runs x seeds a side) detects at 80% power,
    from a pilot study's variance (study/power.py); where there is none, how to get it."""

    P, S = cfg.pretrain_seeds, cfg.seeds
    if pilot is None or not pilot.is_file():
        return [f"detectable difference: no pilot variance (run this study once with pretrain_seeds >= 2, or pass "
                f"--pilot REPORT.json of a study like it; then `encoderlab study-plan REPORT.json --runs {P} "
                f"--seeds {S}`)"]

    scores = seed_scores(StudyResults.from_json(json.loads(pilot.read_text())))
    out = []
    for t in [t.name for t in cfg.tasks] or sorted({t for s in scores.values() for t in s}):
        c = components(scores, t)
        if c is None:
            out.append(f"detectable difference on {t}: the pilot {pilot} has no variance for it")
        elif P < 2:
            out.append(f"detectable difference on {t}: none testable with 1 pretraining run a variant (pretrain_seeds "
                       f">= 2); at 3 runs x {S} seeds {c.detectable(3, S):.3f} (pilot {pilot})")
        else:
            out.append(f"detectable difference on {t} at {P} runs x {S} seeds a side: {c.detectable(P, S):.3f} "
                       f"(80% power, two-sided 5%; variance from {pilot})")
    return out
