"""Robustness probe: accuracy of a fine-tuned classifier on perturbed copies of a task's eval split.

Three kinds of perturbation (the rules are in encoderlab/eval/perturb.py):

- ``synonym``: WordNet synonyms of content words, part of speech and sense kept; label kept.
- ``negation_flip``: "not" inserted after the copula where the construction flips the label:
  single-clause evaluative sentences of a two-class sentiment task ("sentiment": sst2), and the
  hypothesis of an entailed pair of an NLI task ("entailment": rte, mnli).
- ``negation_neutral``: "and false is not true" appended (the sentence, or the hypothesis); label kept.

Only changed examples are compared: for each kind, ``clean_acc`` and ``perturbed_acc`` are on the
same subset (the examples the kind could perturb), ``drop`` is their difference, and the
``overall_*`` accuracies are on the whole split with the perturbed copies swapped in. The model is
fine-tuned once per seed by the existing fine-tuning (encoderlab/eval/finetune.py, ``train_seed``);
the clean split and every perturbed subset are extra eval splits of that same run, so each seed's
clean and perturbed numbers come from one model. Perturbations use their own fixed seed
(``perturb_seed``): every fine-tuning seed sees the same perturbed copies. Summaries are the median
and spread over the fine-tuning seeds, never the best.

``evaluate_robustness`` is the entry point for the CLI and for studies (claim 13: ELECTRA loses
more under synonym substitution than BERT; ``drop_by_family`` compares results).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, Literal

from torch import nn

from encoderlab.checkpoint import load_model
from encoderlab.config import Config, ConfigError
from encoderlab.data.tokenizer import load_tokenizer
from encoderlab.device import resolve_device
from encoderlab.errors import EncoderlabError
from encoderlab.eval import perturb
from encoderlab.eval import wordnet as wordnet_module  # here: it needs the "robustness" extra
from encoderlab.eval.common import spread, versions
from encoderlab.eval.config import FinetuneConfig
from encoderlab.eval.finetune import check_vocab, subset, train_seed
from encoderlab.eval.tasks import Example, TaskData, TaskSpec, get_task, load_task
from encoderlab.eval.wordnet import PACKAGE
from encoderlab.models.pairs import deployed

Kind = Literal["synonym", "negation_flip", "negation_neutral"]
KINDS: tuple[str, ...] = ("synonym", "negation_flip", "negation_neutral")
# Built-in tasks whose negation construction is known; any other task needs negation=... set.
AUTO_NEGATION = {"sst2": "sentiment", "rte": "entailment", "mnli": "entailment"}
NOT_ENTAILED = ("not_entailment", "contradiction")  # the label an entailed pair takes when H is negated
FEW = 30  # below this many perturbed examples the table marks a kind's numbers as too few to compare
METRICS = ("clean_acc", "perturbed_acc", "drop", "overall_clean_acc", "overall_perturbed_acc")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RobustnessConfig(Config):
    """What to perturb and how; the fine-tuning itself is a FinetuneConfig."""

    kinds: tuple[Kind, ...] = KINDS
    perturb_seed: int = 0  # fixed: the same perturbed copies for every fine-tuning seed
    synonym_rate: float = 0.5  # share of a text's eligible words replaced ...
    max_substitutions: int = 3  # ... at most this many per text
    negation: Literal["auto", "sentiment", "entailment", "off"] = "auto"  # auto: by task name (AUTO_NEGATION)
    split: str | None = None  # None: the task's first eval split
    samples: int = 3  # perturbed examples kept in the result per kind, to read

    def validate(self) -> None:
        if not self.kinds or len(set(self.kinds)) != len(self.kinds) or not set(self.kinds) <= set(KINDS):
            raise ConfigError(f"kinds must list each of {list(KINDS)} at most once, got {list(self.kinds)}")
        if not 0 < self.synonym_rate <= 1:
            raise ConfigError(f"synonym_rate must be in (0, 1], got {self.synonym_rate}")
        if self.max_substitutions < 1 or self.samples < 0:
            raise ConfigError("max_substitutions must be >= 1 and samples >= 0")
        if self.negation not in ("auto", "sentiment", "entailment", "off"):
            raise ConfigError(f"negation must be auto, sentiment, entailment or off, got {self.negation!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PerturbedSet:
    """One kind's perturbed copies of an eval list: ``indices[i]`` is the clean example of ``examples[i]``."""

    kind: str
    construction: str
    indices: tuple[int, ...]
    examples: tuple[Example, ...]


@dataclasses.dataclass(frozen=True, kw_only=True)
class KindResult:
    kind: str
    construction: str
    n_eval: int
    n_perturbed: int
    per_seed: tuple[dict[str, float], ...]  # seed and METRICS
    summary: dict[str, dict[str, float]]  # metric -> median, min, max, std, n over seeds
    samples: tuple[dict[str, Any], ...]  # a few clean/perturbed pairs with their labels


@dataclasses.dataclass(frozen=True, kw_only=True)
class RobustnessResult:
    task: str
    model: str
    family: str
    split: str
    n_eval: int
    seeds: tuple[int, ...]
    kinds: dict[str, KindResult]
    skipped: dict[str, str]  # kind -> why it was not run
    finetune_config: dict[str, Any]
    robustness_config: dict[str, Any]
    labels: tuple[str, ...]
    precision: str  # what fine-tuning and scoring ran in (FinetuneConfig.precision resolved)
    files: dict[str, str]
    versions: dict[str, str]
    date: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def split_overrides(items: list[str]) -> tuple[list[str], list[str]]:
    """``key=value`` strings as (FinetuneConfig's, RobustnessConfig's): each key goes to the config
    that has it; a key neither has fails, listing both configs' keys."""
    probe_keys = {f.name for f in dataclasses.fields(RobustnessConfig)}
    tune_keys = {f.name for f in dataclasses.fields(FinetuneConfig)} | set(FinetuneConfig.RENAMED)
    key = [item.split("=", 1)[0].strip() for item in items]
    unknown = sorted(k for k, item in zip(key, items) if "=" in item and k not in probe_keys | tune_keys)
    if unknown:
        raise ConfigError(f"unknown key(s) {unknown}; FinetuneConfig keys: {sorted(tune_keys)}; "
                          f"RobustnessConfig keys: {sorted(probe_keys)}")
    probe = [item for k, item in zip(key, items) if k in probe_keys]
    return [item for item in items if item not in probe], probe


# ---- building the perturbed copies ---------------------------------------------------------------
def negation_construction(spec: TaskSpec, labels: tuple[str, ...], setting: str) -> str | None:
    """The negation construction for a task (sentiment, entailment or None), checked against its labels."""
    construction = AUTO_NEGATION.get(spec.name) if setting == "auto" else None if setting == "off" else setting
    if construction == "sentiment" and (spec.text_b is not None or len(labels) != 2):
        raise EncoderlabError(f"task {spec.name}: negation=sentiment needs one text column and two labels "
                              f"(text_b {spec.text_b!r}, labels {list(labels)})")
    if construction == "entailment" and (spec.text_b is None or "entailment" not in labels
                                         or not any(n in labels for n in NOT_ENTAILED)):
        raise EncoderlabError(f"task {spec.name}: negation=entailment needs a hypothesis column (text_b) and the "
                              f"labels 'entailment' and one of {list(NOT_ENTAILED)}; labels: {list(labels)}")
    return construction


def build_perturbed(examples: list[Example], kind: str, cfg: RobustnessConfig, labels: tuple[str, ...],
                    construction: str | None, wordnet=None) -> PerturbedSet:
    """The perturbed copies of ``examples`` for one kind; examples it cannot change are left out."""
    if kind not in KINDS:
        raise ConfigError(f"unknown perturbation kind {kind!r}; valid: {list(KINDS)}")
    if kind != "synonym" and construction is None:
        raise EncoderlabError(f"{kind}: no negation construction for this task (set negation=sentiment|entailment)")
    if wordnet is None and (kind == "synonym" or (kind == "negation_flip" and construction == "sentiment")):

        wordnet = wordnet_module.load()
    out: list[tuple[int, Example]] = []
    for i, ex in enumerate(examples):
        new = _perturb(ex, kind, cfg, labels, construction, wordnet)
        if new is not None:
            out.append((i, new))
    name = "wordnet-3.0 synonyms" if kind == "synonym" else str(construction)
    return PerturbedSet(kind=kind, construction=name, indices=tuple(i for i, _ in out),
                        examples=tuple(e for _, e in out))


def _perturb(ex: Example, kind: str, cfg: RobustnessConfig, labels: tuple[str, ...], construction: str | None,
             wordnet) -> Example | None:
    if kind == "synonym":
        texts = [ex.text_a, ex.text_b]
        new = [perturb.substitute_synonyms(t, wordnet, seed=cfg.perturb_seed, rate=cfg.synonym_rate,
                                           max_substitutions=cfg.max_substitutions) if t is not None else None
               for t in texts]
        if new == [None, None]:
            return None
        a, b = (n.text if n is not None else t for n, t in zip(new, texts))
        return dataclasses.replace(ex, text_a=a, text_b=b)
    # the sentence of a sentiment task, the hypothesis of an NLI pair
    field = "text_a" if construction == "sentiment" else "text_b"
    text = getattr(ex, field)
    if kind == "negation_neutral":
        return dataclasses.replace(ex, **{field: perturb.append_tautology(text)})
    if construction == "sentiment":
        new_label = 1 - ex.label
    elif ex.label == labels.index("entailment"):
        new_label = labels.index(next(n for n in NOT_ENTAILED if n in labels))
    else:
        return None  # only an entailed pair has a known label once its hypothesis is negated
    negated = perturb.negate_predicate(text, construction, wordnet)
    return None if negated is None else dataclasses.replace(ex, **{field: negated}, label=new_label)


# ---- evaluation ----------------------------------------------------------------------------------
def evaluate_robustness(model_dir: str | Path | nn.Module, task: str | TaskSpec,
                        finetune_config: FinetuneConfig | None = None, config: RobustnessConfig | None = None,
                        seeds: int | list[int] = 1, *, data_dir: str | Path | None = None, tokenizer_dir=None,
                        log=print) -> RobustnessResult:
    """Fine-tune ``model_dir`` on ``task`` once per seed and score it on the clean eval split and on
    each kind's perturbed copies (module doc). ``seeds``: a count N (0..N-1) or a list."""
    cfg = finetune_config or FinetuneConfig()
    rcfg = config or RobustnessConfig()
    resolve_device(cfg.device)  # a device this machine lacks fails before anything is loaded
    spec = task if isinstance(task, TaskSpec) else get_task(task)
    if spec.kind != "classification":
        raise EncoderlabError(f"task {spec.name}: the robustness probe needs a classification task (accuracy), "
                              f"not {spec.kind}")
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    if not seed_list:
        raise EncoderlabError("seeds: give at least one fine-tuning seed")
    if isinstance(model_dir, nn.Module) and tokenizer_dir is None:
        raise ValueError("evaluate_robustness: an in-memory model needs tokenizer_dir=...")
    data = load_task(spec, data_dir)
    split = rcfg.split or next(iter(data.evals))
    if split not in data.evals:
        raise EncoderlabError(f"task {spec.name}: no eval split {split!r}; splits: {list(data.evals)}")
    construction = negation_construction(spec, data.labels, rcfg.negation)
    pretrained = model_dir if isinstance(model_dir, nn.Module) else load_model(model_dir)
    tok = load_tokenizer(tokenizer_dir or model_dir)
    check_vocab(tok, pretrained, str(tokenizer_dir or model_dir))
    log(data.summary())

    clean = subset(data.evals[split], cfg.max_eval_examples)  # the subset fine-tuning would score
    sets, skipped = _perturbed_sets(clean, rcfg, data.labels, construction)
    for k, why in skipped.items():
        log(f"  {k}: skipped ({why})")
    if not sets:
        raise EncoderlabError(f"task {spec.name} split {split}: nothing to compare, every kind was skipped: {skipped}")
    for s in sets.values():
        log(f"  {s.kind} ({s.construction}): {len(s.examples)} of {len(clean)} examples perturbed")
    # one fine-tuning per seed scores all of them: extra eval splits, accuracy only
    evals = {"clean": clean}
    for k, s in sets.items():
        evals[f"{k}/clean"] = [clean[i] for i in s.indices]
        evals[f"{k}/perturbed"] = list(s.examples)
    probe = TaskData(spec=spec.replace(metrics=("acc",)), labels=data.labels, train=data.train, evals=evals,
                     files=data.files)
    runs = [train_seed(pretrained, tok, probe, cfg.replace(max_eval_examples=None), s, log) for s in seed_list]
    log(f"  precision {runs[0]['precision']} ({runs[0]['precision_reason']})")
    scores = [r["scores"] for r in runs]
    kinds = {k: _kind_result(s, clean, scores, seed_list, rcfg.samples, data.labels) for k, s in sets.items()}
    return RobustnessResult(
        task=spec.name, model=str(model_dir) if not isinstance(model_dir, nn.Module) else "<in-memory>",
        family=deployed(pretrained).config.family, split=split, n_eval=len(clean), seeds=tuple(seed_list),
        kinds=kinds, skipped=skipped, finetune_config=cfg.to_dict(), robustness_config=rcfg.to_dict(),
        labels=data.labels, precision=runs[0]["precision"], files=data.files,
        versions={**versions(), "wordnet": perturb_source(rcfg)},
        date=time.strftime("%Y-%m-%dT%H:%M:%S%z"))


def _perturbed_sets(clean: list[Example], rcfg: RobustnessConfig, labels: tuple[str, ...],
                    construction: str | None) -> tuple[dict[str, PerturbedSet], dict[str, str]]:
    """Each requested kind's perturbed set; a kind that cannot run or changes nothing goes to ``skipped``."""
    sets, skipped = {}, {}
    for kind in rcfg.kinds:
        if kind != "synonym" and construction is None:
            skipped[kind] = (f"no negation construction for this task; built in for {sorted(AUTO_NEGATION)}, "
                             "else set negation=sentiment|entailment")
            continue
        s = build_perturbed(clean, kind, rcfg, labels, construction)
        if s.examples:
            sets[kind] = s
        else:
            skipped[kind] = f"no example of the {len(clean)} could be perturbed ({s.construction})"
    return sets, skipped


def _kind_result(s: PerturbedSet, clean: list[Example], runs: list[dict[str, float]], seed_list: list[int],
                 samples: int, labels: tuple[str, ...]) -> KindResult:
    n, N = len(s.examples), len(clean)
    per_seed = []
    for seed, scores in zip(seed_list, runs):
        c, p, overall = scores[f"{s.kind}/clean_acc"], scores[f"{s.kind}/perturbed_acc"], scores["clean_acc"]
        # accuracies are counts over n: swap the subset's clean hits for its perturbed ones
        hits = round(overall * N) - round(c * n) + round(p * n)
        per_seed.append({"seed": seed, "clean_acc": c, "perturbed_acc": p, "drop": c - p,
                         "overall_clean_acc": overall, "overall_perturbed_acc": hits / N})
    shown = [{"clean": _texts(clean[i]), "perturbed": _texts(e), "label": labels[clean[i].label],
              "perturbed_label": labels[e.label]} for i, e in zip(s.indices[:samples], s.examples[:samples])]
    return KindResult(kind=s.kind, construction=s.construction, n_eval=N, n_perturbed=n, per_seed=tuple(per_seed),
                      summary={m: spread([r[m] for r in per_seed]) for m in METRICS}, samples=tuple(shown))


def _texts(ex: Example) -> str:
    return ex.text_a if ex.text_b is None else f"{ex.text_a} ||| {ex.text_b}"


def perturb_source(rcfg: RobustnessConfig) -> str:
    """Where the synonyms came from, recorded with every result."""

    return f"WordNet 3.0 from {PACKAGE}" if "synonym" in rcfg.kinds else "not used"


# ---- reporting -----------------------------------------------------------------------------------
def robustness_table(result: RobustnessResult) -> str:
    """One row per kind: examples perturbed, clean and perturbed accuracy on them, the drop (medians
    over seeds, in points, the drop's min..max in brackets) and the whole split's accuracy before and after."""
    head = ["kind", "perturbed", "clean acc", "pert. acc", "drop [min..max]", "overall clean -> pert."]
    rows = []
    for k in result.kinds.values():
        m = {name: s["median"] for name, s in k.summary.items()}
        d = k.summary["drop"]
        rows.append([k.kind, f"{k.n_perturbed}/{k.n_eval}", f"{100 * m['clean_acc']:.1f}",
                     f"{100 * m['perturbed_acc']:.1f}",
                     f"{100 * d['median']:+.1f} [{100 * d['min']:+.1f}..{100 * d['max']:+.1f}]",
                     f"{100 * m['overall_clean_acc']:.1f} -> {100 * m['overall_perturbed_acc']:.1f}"])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head, *rows]]
    few = [k.kind for k in result.kinds.values() if k.n_perturbed < FEW]
    if few:
        lines.append(f"{', '.join(few)}: fewer than {FEW} examples perturbed; too few to compare models on")
    lines += [f"{k}: skipped ({why})" for k, why in result.skipped.items()]
    lines.append(f"({result.task} {result.split}, {result.family}; accuracy in %, median of {len(result.seeds)} "
                 f"fine-tuning seed(s); drop = clean - perturbed on the perturbed examples)")
    return "\n".join(lines)


def drop_by_family(results: list[RobustnessResult], kind: str = "synonym") -> dict[str, dict[str, float]]:
    """Claim 13's comparison: per model family, the median and spread of the drop under ``kind``
    over every seed of every result of that family (results of one task and one probe setting)."""
    if len({(r.task, r.split, str(r.robustness_config)) for r in results}) > 1:
        raise EncoderlabError("drop_by_family: the results differ in task, split or probe settings; compare like "
                              "with like")
    drops: dict[str, list[float]] = {}
    for r in results:
        if kind in r.kinds:
            drops.setdefault(r.family, []).extend(s["drop"] for s in r.kinds[kind].per_seed)
    return {family: spread(ds) for family, ds in drops.items()}
