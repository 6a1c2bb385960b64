"""CLI: ``encoderlab study STUDY.yaml [key=value ...]``, ``encoderlab demo`` and
``encoderlab study-claims REPORT_DIR`` (re-derive a written report's claims with the present code)."""

from __future__ import annotations

from pathlib import Path

from encoderlab.study.claims import steady_train
from encoderlab.study.config import StudyConfig
from encoderlab.study.estimate import estimate
from encoderlab.study.inputs import check_inputs
from encoderlab.study.metrics import TOKENS_PER_S
from encoderlab.study.report import refresh_claims
from encoderlab.study.results import StudyResults
from encoderlab.study.runner import run_study

BUILTIN = Path(__file__).resolve().parent / "builtin"


def register(sub) -> None:
    p = sub.add_parser("study", help="pretrain variants at equal FLOPs, evaluate, and write the claims report")
    p.add_argument("study", help="a study YAML, or a built-in name: " + ", ".join(sorted(builtin_names())))
    p.add_argument("overrides", nargs="*", metavar="key=value", help="e.g. corpus=[../shared/data/enwiki_extract]")
    p.add_argument("--plan", action="store_true", help="check the inputs, then print the stages, the jobs, the "
                   "wall-clock timed on this machine and the detectable difference, and stop before any compute")
    p.add_argument("--pilot", metavar="REPORT.json", help="a study report whose variance sizes the detectable "
                   "difference (default: this study's own report.json, when an earlier run wrote one)")
    p.set_defaults(func=cmd_study)
    p = sub.add_parser("demo", help="a small claims study of tiny BERT, ALBERT and ELECTRA on the embedded corpus")
    p.add_argument("--smoke", action="store_true", help="every stage at a budget too small to learn anything: "
                   "a check that the pipeline runs on this machine (CI runs it on an empty cache)")
    p.add_argument("overrides", nargs="*", metavar="key=value")
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("study-plan", help="size a study before compute: variance pooled from a committed report, "
                       "the difference a design detects, the runs and seeds a claim's published effect needs")
    p.add_argument("report", help="a study's report.json (the pilot whose variance is read)")
    p.add_argument("--runs", type=int, default=3, help="pretraining runs a variant (default 3)")
    p.add_argument("--seeds", type=int, default=3, help="fine-tuning seeds a run (default 3)")
    p.add_argument("--budget-flops", type=float, help="the planned budget a run (default: the pilot's); "
                   "pretraining cost scales with it from the pilot's measured wall-clock")
    p.set_defaults(func=cmd_study_plan)
    p = sub.add_parser("study-claims", help="re-derive the claims of a written study report (report.json and "
                       "report.md's Claims section) from its stored results, keeping the rest")
    p.add_argument("folder", help="a folder with report.json and report.md")
    p.set_defaults(func=cmd_study_claims)


def builtin_names() -> list[str]:
    return [p.stem for p in BUILTIN.glob("*.yaml")]


def load_study(name_or_path: str, overrides=()):
    path = Path(name_or_path)
    if not path.exists():
        if name_or_path not in builtin_names():
            raise FileNotFoundError(f"study {name_or_path!r}: no such file and not a built-in study "
                                    f"({', '.join(sorted(builtin_names()))})")
        path = BUILTIN / f"{name_or_path}.yaml"
    return StudyConfig.from_yaml(path).with_overrides(list(overrides))


def cmd_study(args) -> int:
    return run(args.study, args.overrides, plan_only=args.plan, pilot=args.pilot)


# `encoderlab demo --smoke`: one seed, one checkpoint, a few steps per variant, 64 fine-tuning examples,
# a 400-passage corpus and a 2,000-piece vocabulary; every stage still runs (key=value after it wins).
SMOKE = ("budget_flops=5e10", "seeds=1", "eval_fractions=[1.0]", "finetune_fractions=[1.0]", "speed_seconds=0.05",
         "finetune.epochs=1", "finetune.max_train_examples=64", "finetune.max_eval_examples=64",
         "max_documents=400", "vocab_size=2000")


def cmd_demo(args) -> int:
    return run("demo", [*SMOKE, *args.overrides] if args.smoke else args.overrides)


def cmd_study_plan(args) -> int:
    from encoderlab.study.power import markdown, measured_costs, plan

    if not Path(args.report).is_file():
        raise FileNotFoundError(f"{args.report}: no such report.json")
    budget, pretrain_h, finetune_h = measured_costs(Path(args.report))
    scale = (args.budget_flops / budget) if args.budget_flops else 1.0
    p = plan(Path(args.report), runs=args.runs, seeds=args.seeds, pretrain_core_h=pretrain_h * scale,
             finetune_core_h=finetune_h)
    print(markdown(p))
    print(f"Costs: a pretraining run {pretrain_h * scale:.2f} core-hours at {budget * scale:.2g} FLOPs (the pilot's "
          f"{pretrain_h:.2f} at {budget:.2g}, scaled by FLOPs), a fine-tuning {finetune_h * 3600:.0f} core-seconds "
          "a task and seed; a design's core-hours are for two variants, every task of the row.")
    return 0


def cmd_study_claims(args) -> int:
    folder = Path(args.folder)
    for name in ("report.json", "report.md"):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{folder / name}: no such file (study-claims needs a study's report folder)")
    changed = refresh_claims(folder)
    print(f"{folder}: claims " + (", ".join(map(str, changed)) + " changed" if changed else "unchanged"))
    return 0


def run(study: str, overrides, *, plan_only: bool = False, pilot: str | None = None) -> int:
    cfg = load_study(study, overrides)  # a misspelled role or variant fails here (study/roles.py)
    notes = cfg.role_notes()  # the claims this study will not run, and why, before any compute
    check_inputs(cfg, Path(cfg.out_dir))  # seconds: every file it will read, before the plan times anything
    own = Path(cfg.out_dir) / "report.json"
    plan = estimate(cfg, notes=notes, pilot=Path(pilot) if pilot else own if own.is_file() else None)
    for line in plan.lines():
        print(f"[study] {line}")
    if plan_only:
        return 0
    print_summary(run_study(cfg, plan_s=plan.split_s))
    return 0


def print_summary(report: dict) -> None:
    print("\nvariant            params    tokens/s   downstream (median ± std)")
    for name, r in StudyResults.from_json(report).variants.items():
        fs = r.final_score()
        tps = steady_train(r)[TOKENS_PER_S]
        print(f"{name:<18}{r.measure.params_encoder / 1e6:6.2f}M  {tps:9.0f}   "
              + (f"{fs['median']:.3f} ± {fs['std']:.3f}" if fs else "–"))
    print("\nclaims:")
    for c in report["claims"]:
        if c["verdict"] != "not run":
            print(f"  {c['claim']:>2}. [{c['verdict']}] {c['title']}")
    if not_run := [str(c["claim"]) for c in report["claims"] if c["verdict"] == "not run"]:
        print(f"  not run (their variants or probes are not in this study): {', '.join(not_run)}")
    print(f"\nreport: {Path(report['config']['out_dir']) / 'report.md'}")
