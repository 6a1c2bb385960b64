"""The ``encoderlab`` command: a thin layer that parses arguments and calls the library.

Each area of the library contributes its subcommands through a ``register(subparsers)``
function in its own ``cli`` module, listed in COMMAND_MODULES; the handler set with
``set_defaults(func=...)`` receives the parsed namespace and returns an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

COMMAND_MODULES = [
    "encoderlab.models.cli",
    "encoderlab.interop.cli",
    "encoderlab.data.cli",
    "encoderlab.train.cli",
    "encoderlab.eval.cli",
    "encoderlab.generate.cli",
    "encoderlab.study.cli",
    "encoderlab.transfer.cli",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="encoderlab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    command = "encoderlab"
    try:
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)
        # key=value overrides after a flag (`study FILE --plan out_dir=x`): argparse ends a positional
        # list at the first flag, so the rest come back unrecognized; they keep their order.
        if extra and isinstance(getattr(args, "overrides", None), list) and all(
                "=" in x and not x.startswith("-") for x in extra):
            args.overrides = [*args.overrides, *extra]
        elif extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        command = f"encoderlab {args.command}"
        return int(args.func(args) or 0)
    except (FileNotFoundError, ValueError) as e:  # user errors: one clear line, no traceback
        print(f"{command}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:  # Ctrl-C anywhere (loading, a study's speed stage): one line, no traceback
        signum = int(str(e).split()[-1]) if str(e).startswith("signal ") else signal.SIGINT  # study/launch.py's
        print(f"\n{command}: interrupted", file=sys.stderr)
        return 128 + int(signum)  # 130 for Ctrl-C, 143 for SIGTERM, as a shell reports them


if __name__ == "__main__":
    sys.exit(main())
