"""What a study is: one corpus and tokenizer, a FLOPs budget, a base recipe, the variants, the
evaluations, and which variant plays which role in which claim.

A study holds only what belongs to a study. Everything a pretraining run needs beyond that comes
from ``base``, a real :class:`PretrainConfig`: a new trainer or data setting is set there, as in any
recipe, and reaches every variant with no change here. study/plan.py turns (study, variant) into the
variant's PretrainConfig: the variant's model and objective, the study's token store, the budget in
FLOPs, and the checkpoint, log and warm-up steps derived from it, then the variant's overrides.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import warnings
from pathlib import Path
from typing import Any, Literal

from encoderlab.config import Config, ConfigError, ConfigNote, renamed_bf16
from encoderlab.eval.config import FinetuneConfig, PromptConfig
from encoderlab.eval.robustness import RobustnessConfig
from encoderlab.generate.config import GenerationConfig
from encoderlab.objectives.base import ObjectiveConfig
from encoderlab.study.prompt_check import check_prompt_fields
from encoderlab.study.roles import ClaimRoles, check_roles
from encoderlab.train.config import DataConfig, ModelSpec, OptimizerConfig, PretrainConfig, TrainerConfig


def _lr_override(value: Any) -> tuple[str, Any]:
    return "overrides", [f"optimizer.lr={value}"] if value is not None else []


@dataclasses.dataclass(frozen=True, kw_only=True)
class VariantSpec(Config):
    """One pretraining run of the study. Every variant sees the same token store, examples (same
    seed, same order) and FLOPs budget; only the model and objective differ, and what ``overrides``
    changes in the variant's recipe (``optimizer.lr=5e-4``): a per-family setting, which the report
    lists, since equal compute is only equal when everything else is. Sentence-pair examples follow
    from the model: head "pretraining" with the objective's sentence_loss gives NSP (family bert) or
    SOP (family albert); otherwise packed full sentences."""

    RENAMED = {"lr": _lr_override}

    name: str
    model: ModelSpec
    objective: ObjectiveConfig = dataclasses.field(default_factory=ObjectiveConfig)
    overrides: tuple[str, ...] = ()  # dotted key=value on the variant's PretrainConfig, after the study's
    # ALBERT claim 4: also fine-tune a copy with its sharing removed (convert --unshare).
    unshare: bool = False

    def validate(self) -> None:
        if not self.name or any(c in self.name for c in "/\\ :"):
            raise ConfigError(f"variant name {self.name!r} must be non-empty without '/', '\\', ':' or spaces")
        for item in self.overrides:
            key = item.split("=", 1)[0].strip()
            if "=" not in item or key.split(".")[0] in ("model", "objective"):
                raise ConfigError(f"variant {self.name!r}: override {item!r} must be key=value outside model and "
                                  "objective (set those in the variant's own model and objective)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TaskRef(Config):
    """A downstream task: a built-in name (sst2, rte, chnsenticorp, ...) or a task-spec YAML path;
    ``data_dir`` where its files are ("demo" means the demo corpus's derived task)."""

    name: str
    data_dir: str | None = None


@functools.lru_cache(maxsize=256)
def task_label(name: str) -> str:
    """How a report shows a task: a spec file's own ``name:`` (the stem when it cannot be read: a
    report read on another machine), a built-in's name as it is. The stages keep the path as the key."""
    if not name.endswith((".yaml", ".yml")):
        return name
    import yaml

    try:
        spec = yaml.safe_load(Path(name).read_text())
        return str(spec["name"]) if isinstance(spec, dict) and spec.get("name") else Path(name).stem
    except (OSError, yaml.YAMLError):
        return Path(name).stem


# The flat keys of studies written before ``base``: where each now lives.
_FLAT_TO_BASE = {"seq_len": ("data", "seq_len"), "batch_size": ("data", "batch_size"),
                 "eval_batches": ("data", "eval_batches"), "short_seq_len": ("data", "short_seq_len"),
                 "lr": ("optimizer", "lr"), "seed": ("trainer", "seed"), "precision": ("trainer", "precision")}


def default_base() -> PretrainConfig:
    """The recipe every variant starts from: batch 32 x 128, 16 held-out batches, AdamW at 1e-3
    (tiny models), precision auto. data.path and the budget are the study's, filled in by the plan."""
    return PretrainConfig(data=DataConfig(kind="store", batch_size=32, seq_len=128, eval_batches=16),
                          optimizer=OptimizerConfig(lr=1e-3), trainer=TrainerConfig(max_steps=1))


@dataclasses.dataclass(frozen=True, kw_only=True)
class StudyConfig(Config):
    name: str = "study"
    out_dir: str = "runs/study"
    # Text: corpus paths (files, dirs, globs in any format encoderlab prepare reads), or empty for
    # the embedded demo corpus (standard-library docstrings). Or a prepared token store.
    corpus: tuple[str, ...] = ()
    store: str | None = None
    tokenizer: str | None = None  # an existing tokenizer dir; None: train one on the corpus
    vocab_size: int = 8000
    max_documents: int | None = None  # cap the corpus (quick runs)
    # How plain-text corpus files split into documents (data.corpus.CorpusConfig): a file of one
    # paragraph per line and no blank lines (People's Daily) needs "line", or it is one document
    # and the held-out split gets none of it.
    doc_split: Literal["blank_line", "line", "file"] = "blank_line"
    base: PretrainConfig = dataclasses.field(default_factory=default_base)
    budget_flops: float = 1e14
    # Warm-up of the learning rate and the short-sequence phase (base.data.short_seq_len), as
    # fractions of each variant's steps, which the budget decides. Tiny models at length 128
    # otherwise sit on the unigram plateau (docs/benchmarks.md).
    warmup_fraction: float = 0.06
    short_seq_fraction: float = 0.0
    # Checkpoints evaluated (held-out loss) at these fractions of the budget; downstream tasks at
    # the fractions in finetune_fractions.
    eval_fractions: tuple[float, ...] = (0.125, 0.25, 0.5, 1.0)
    finetune_fractions: tuple[float, ...] = (0.5, 1.0)
    variants: tuple[VariantSpec, ...] = ()
    roles: ClaimRoles = dataclasses.field(default_factory=ClaimRoles)
    # A role whose variant looks misspelled, or a role mapped to no variant, stops the study before
    # any compute (study/roles.py); true runs it anyway, those claims "not run".
    allow_missing_roles: bool = False
    tasks: tuple[TaskRef, ...] = ()
    glue_dir: str | None = None  # default data_dir of tasks that name none (GLUE-style root)
    finetune: FinetuneConfig = dataclasses.field(default_factory=FinetuneConfig)
    seeds: int = 3
    # BLiMP-format jsonl for claim 8; None: minimal pairs derived from held-out text (two adjacent
    # words swapped), "off" to skip.
    minimal_pairs: str | None = None
    latency: bool = True
    # Claim 12: a generation task (encoderlab generate: WikiExtractor files give title-from-first-
    # paragraph pairs, or a pairs file / split directory); None skips the generation probe.
    generation_task: str | None = None
    generation: GenerationConfig = dataclasses.field(default_factory=GenerationConfig)
    # Claim 13: a classification task for the robustness probe (e.g. sst2; fine-tuned with `finetune`
    # and perturbed as `robustness` says); None skips it.
    robustness_task: str | None = None
    robustness: RobustnessConfig = dataclasses.field(default_factory=RobustnessConfig)
    # Pretrainings run at once, each its own process with `threads` torch threads (None: the
    # cores this process may use // pretrain_jobs; with one job, torch's default). On a CPU, two
    # one-thread runs get more done than one run on two threads; once nothing is left to start,
    # the runs still going take up the freed cores (encoderlab/threads.py). The speed comparison
    # is measured afterwards, side by side (study/speed.py), at `threads` threads.
    pretrain_jobs: int = 1
    threads: int | None = None
    # Fine-tunings (one checkpoint on one task, all its seeds) run at once, each in a worker
    # process with cores // finetune_jobs threads (None: as many as pretrain_jobs).
    finetune_jobs: int | None = None
    speed_seconds: float = 1.5  # timed per variant and round (5 rounds) in the side-by-side speed stage
    # Pretraining runs per variant, each from its own trainer.seed (base's + k: initialisation and data
    # order), the unit of replication of the claims' statistics (study/stats.py); run k > 0 is named
    # "<variant>@seed<k>". With 1 the claims' intervals cover fine-tuning noise only.
    pretrain_seeds: int = 1
    # A variant's pretraining runs are its replicates: the study starts or resumes one only on the kind
    # of machine (precision.machine_kind) its other runs used, since CPU kinds train in different
    # precisions and kernels. true lets them mix; the report names the variants that do.
    mixed_machines: bool = False
    # Pretrain again, from the same recipe and seed, every run of this study's variants whose stage is
    # recorded but whose checkpoints are not on this machine (stages.json came without run folders) and
    # that a stage still to compute needs (BLiMP, a probe, a new task; runner._needed_runs), so those
    # stages can run. The recorded run stays what the
    # report's curves and fine-tunings read; the stage gains a "recreated" entry saying how the new
    # run's held-out records compare with it (study/runs.recreation), and the report names such runs.
    recreate_weights: bool = False
    # Leave out every stage still to compute that needs weights not on this machine (a new task, BLiMP, a
    # probe of a recorded run) instead of stopping: the report lists what it left out. For writing one
    # report from parts' stage records (docs/studies.md); not with recreate_weights.
    skip_missing_weights: bool = False
    # A claim of matching (claims 5b and 11) is "equivalent within ±equivalence_margin" when the 95%
    # interval of the difference lies inside it (score units: 0.01 is one point of accuracy).
    equivalence_margin: float = 0.01
    # Fractions of the budget fine-tuned for the named variants beyond finetune_fractions (each also in
    # eval_fractions): claim 5b fine-tunes the ELECTRA role at 1/4 and 1/2 of the budget, no one else.
    extra_finetune_fractions: dict[str, tuple[float, ...]] = dataclasses.field(default_factory=dict)
    # The no-pretraining controls: each architecture the variants fine-tune (the bert role's first) from
    # fresh weights on every task, with the same seeds (study/runner.random_control). A task enters a
    # claim's aggregates only when the variants that claim compares, pooled, beat their own
    # architectures' controls beyond the interval (study/judge.Judge.among).
    random_control: bool = False
    # A folder of BLiMP paradigm files (../shared/data/blimp: 36 of the 67, "BLiMP dev") scored zero-shot
    # at every checkpoint of each variant's seed-0 run and the last of every further pretraining run,
    # compared over runs and pairs (study/blimp.py); a seeded sample
    # of blimp_pairs_per_paradigm from each paradigm (None: all 1,000), the same for every variant: 100 a
    # paradigm (3,600 pairs) costs about a minute per checkpoint of a tiny model on 2 cores (docs/studies.md).
    blimp: str | None = None
    blimp_pairs_per_paradigm: int | None = 100
    # Fine-tuning learning rates to choose from, per model family and width (bert-128, ...) and task, on a
    # held-out fifth of the (capped) training set, never on dev: the family's first variant's seed-0
    # checkpoint is fine-tuned once (seed 0) at each rate, and the best held-out score's rate is used by
    # every variant of that family on that task. Empty: finetune.learning_rate (None: by width).
    finetune_lrs: tuple[float, ...] = ()
    # Claim 17's probe (study/prompt.py): each variant's final checkpoints (every pretraining run) prompted
    # on these classification tasks with their template and verbalizer (eval/tasks.py: sst2, cola, mrpc,
    # rte, ...), ELECTRA through its discriminator, the others through their MLM; at each k of
    # prompt_shots (0: zero-shot, once; k > 0: k examples per class, one draw per seed of prompt_seeds,
    # the same draws for every variant), fine-tuned as ``prompt`` says. Empty: no prompting.
    prompt_tasks: tuple[str, ...] = ()
    prompt_shots: tuple[int, ...] = (0,)
    prompt_seeds: int = 3
    prompt: PromptConfig = dataclasses.field(default_factory=PromptConfig)
    # Where the jobs run (study/executor.py; docs/studies.md, "Running a study on a cluster"): "local",
    # processes of this machine; "slurm", every pretraining run and every fine-tuning or prompting unit a
    # SLURM job submitted with submitit (study/slurm.py), with out_dir on a filesystem the nodes share.
    executor: Literal["local", "slurm"] = "local"
    # A SLURM job's resources: partition and account (None: the cluster's defaults), time limit (a
    # pretraining still running at it saves, is requeued and resumes), CPUs (the job's torch threads),
    # memory (None: the partition's default) and further sbatch options ({qos: high, constraint: a100}).
    partition: str | None = None
    account: str | None = None
    time_limit_min: int = 240
    cpus_per_task: int = 1
    mem_gb: float | None = None
    sbatch: dict[str, str] = dataclasses.field(default_factory=dict)
    # GPUs a pretraining run takes: 1 asks SLURM for one per job; locally, a machine with several runs
    # one pretraining on each (CUDA_VISIBLE_DEVICES). 0: none asked (the runtime still uses a GPU it sees).
    gpus_per_run: int = 0
    # A job that ended without its result (scancel, node failure, time limit past requeues) is submitted
    # again up to this many times, resuming from its last checkpoint; a job whose code failed is not.
    job_retries: int = 3

    @classmethod
    def from_dict(cls, data, *, where: str = ""):
        data = _nest_flat_keys(data, where)
        if isinstance(data, dict) and isinstance(data.get("base"), dict):
            # base gives what differs from default_base(); the budget is the study's, so the
            # default's placeholder step count stands in until the plan replaces it
            data = {**data, "base": _merged(default_base().to_dict(), data["base"])}
        return super().from_dict(data, where=where)

    def validate(self) -> None:
        names = [v.name for v in self.variants]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ConfigError(f"variant names must be unique; repeated: {dup}")
        for f in (*self.eval_fractions, *self.finetune_fractions):
            if not 0 < f <= 1:
                raise ConfigError(f"fractions must be in (0, 1], got {f}")
        missing = sorted(set(self.finetune_fractions) - set(self.eval_fractions))
        if missing:
            raise ConfigError(f"finetune_fractions {missing} must also be in eval_fractions")
        if not 0 <= self.short_seq_fraction < 1:
            raise ConfigError(f"short_seq_fraction must be in [0, 1), got {self.short_seq_fraction}")
        if (self.base.data.short_seq_len is None) != (self.short_seq_fraction == 0):
            raise ConfigError("base.data.short_seq_len and short_seq_fraction go together: set both or neither")
        if self.budget_flops <= 0:
            raise ConfigError("budget_flops must be positive")
        if self.seeds < 1:
            raise ConfigError("seeds must be >= 1")
        for name, fracs in self.extra_finetune_fractions.items():
            if name not in names:
                raise ConfigError(f"extra_finetune_fractions: {name!r} is no variant of the study")
            missing = sorted(set(fracs) - set(self.eval_fractions))
            if missing:
                raise ConfigError(f"extra_finetune_fractions of {name!r}: {missing} must also be in eval_fractions")
        if self.pretrain_seeds < 1:
            raise ConfigError("pretrain_seeds must be >= 1")
        if self.recreate_weights and self.skip_missing_weights:
            raise ConfigError("recreate_weights and skip_missing_weights: one or the other (recreate the runs' "
                              "weights, or leave out the stages that need them)")
        if self.equivalence_margin <= 0:
            raise ConfigError(f"equivalence_margin must be positive, got {self.equivalence_margin}")
        if self.pretrain_jobs < 1 or any(n is not None and n < 1 for n in (self.finetune_jobs, self.threads)):
            raise ConfigError("pretrain_jobs, finetune_jobs and threads must be >= 1")
        if self.cpus_per_task < 1 or self.time_limit_min < 1 or self.job_retries < 0:
            raise ConfigError("cpus_per_task and time_limit_min must be >= 1, job_retries >= 0")
        if self.gpus_per_run not in (0, 1):
            raise ConfigError(f"gpus_per_run: {self.gpus_per_run}; a run takes 0 or 1 GPU (a run spread over several "
                              "GPUs with torchrun is `encoderlab pretrain`'s, not yet a study's)")
        if self.mem_gb is not None and self.mem_gb <= 0:
            raise ConfigError(f"mem_gb must be positive, got {self.mem_gb}")
        # a prompt task with no pattern fails as the study loads
        check_prompt_fields(seeds=self.prompt_seeds, shots=self.prompt_shots, tasks=self.prompt_tasks,
                            prompt=self.prompt)
        self.role_notes()  # names before compute: a misspelled variant fails here, not as "not run" hours later

    def role_notes(self) -> list[str]:
        """Notes on the claims this study will not run (study/roles.py); ConfigError where a role looks
        misspelled or names no variant, unless allow_missing_roles."""
        return check_roles([v.name for v in self.variants], self.roles, prompting=bool(self.prompt_tasks),
                           allow_missing=self.allow_missing_roles)

    def threads_per_job(self, jobs: int | None = None) -> int | None:
        """Torch threads of each of `jobs` processes at once (default pretrain_jobs, which the speed
        stage matches); None: leave torch's default (one job, no `threads` set). Cores are those
        this process may run on, not the host's."""
        jobs = jobs or self.pretrain_jobs
        if self.threads or jobs == 1:
            return self.threads
        return max(1, self.cores() // jobs)

    def cores(self) -> int | None:
        """The cores the study's pretrainings share: threads x pretrain_jobs when threads is set,
        else those this process may run on (not the host's); None with one job at torch's default."""
        if self.threads:
            return self.threads * self.pretrain_jobs
        if self.pretrain_jobs == 1:
            return None
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)

    def variant(self, name: str) -> VariantSpec | None:
        return next((v for v in self.variants if v.name == name), None)


def _merged(default: dict, given: dict) -> dict:
    out = dict(default)
    for k, v in given.items():
        out[k] = _merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _nest_flat_keys(data, where: str):
    """Studies written before ``base`` set recipe fields at the top (seq_len, lr, seed, bf16...):
    each is moved to its place in base, with a ConfigNote naming it."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    if "bf16" in data:
        data["precision"] = renamed_bf16(data.pop("bf16"))[1]
    moved = [k for k in _FLAT_TO_BASE if k in data]
    if not moved:
        return data
    base = dict(data.get("base") or {})
    for key in moved:
        section, field = _FLAT_TO_BASE[key]
        base[section] = {**(base.get(section) or {}), field: data.pop(key)}
    data["base"] = base
    warnings.warn(ConfigNote(f"{where or 'study'}: {moved} are old top-level keys, read as "
                             + ", ".join(f"base.{'.'.join(_FLAT_TO_BASE[k])}" for k in moved)), stacklevel=3)
    return data
