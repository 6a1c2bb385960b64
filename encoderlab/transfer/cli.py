"""CLI: ``encoderlab transfer run`` (one frontier point under the fair protocol) and
``encoderlab transfer report`` (docs/transfer.md's tables, plots and sentence from the records)."""

from __future__ import annotations

from pathlib import Path

from encoderlab.transfer.protocol import FairConfig

GLUE5 = ("cola", "sst2", "mrpc", "stsb", "rte")


def register(sub) -> None:
    p = sub.add_parser("transfer", help="did pretraining help? a checkpoint against its random-init twin, the "
                       "linear probe and an n-gram baseline, each network choosing its own rate on held-out train")
    tsub = p.add_subparsers(dest="transfer_command", metavar="ACTION", required=True)
    r = tsub.add_parser("run", help="fine-tune a checkpoint and its fresh twin with the fair protocol; write records")
    r.add_argument("model", help="a checkpoint folder (with its tokenizer)")
    r.add_argument("--tasks", nargs="+", default=list(GLUE5), help="task names or spec .yaml files (default: "
                   + " ".join(GLUE5) + ")")
    r.add_argument("--data-dir", help="the tasks' root folder (GLUE-style), e.g. ../shared/data/glue")
    r.add_argument("--out", required=True, help="the records folder (a rerun skips what is recorded)")
    r.add_argument("--name", required=True, help="the run's name in the records, e.g. bert-5.7e13-s0")
    r.add_argument("--flops", type=float, help="the run's pretraining FLOPs (default: read from its metrics)")
    r.add_argument("--no-control", action="store_true", help="skip the random-init twin (recorded elsewhere)")
    r.add_argument("--control-only", action="store_true", help="the random-init twin alone (any checkpoint of the "
                   "architecture lends it its shape and tokenizer)")
    r.add_argument("overrides", nargs="*", metavar="key=value", help="protocol settings (FairConfig), e.g. seeds=5 "
                   "learning_rates=[0.001,0.003] max_train_examples=1000")
    r.set_defaults(func=cmd_run)
    t = tsub.add_parser("report", help="the frontier's tables, plots and sentence from record folders")
    t.add_argument("records", nargs="+", help="record folders written by `transfer run`")
    t.add_argument("--out", required=True, help="folder for transfer.json and the plots")
    t.add_argument("--markdown", help="a markdown file whose <!-- transfer --> block is replaced by the tables")
    t.set_defaults(func=cmd_report)


def cmd_run(args) -> int:
    from encoderlab.transfer.run import transfer_point

    cfg = FairConfig().with_overrides(args.overrides)
    transfer_point(args.model, args.tasks, args.out, name=args.name, flops=args.flops, cfg=cfg,
                   data_dir=args.data_dir, controls=not args.no_control, pretrained_too=not args.control_only)
    return 0


def cmd_report(args) -> int:
    from encoderlab.transfer.frontier import write_report

    summary = write_report([Path(r) for r in args.records], Path(args.out),
                           Path(args.markdown) if args.markdown else None)
    print(summary)
    return 0
