"""The ``encoderlab`` command: a thin layer that parses arguments and calls the library.

Each area of the library contributes its subcommands through a ``register(subparsers)``
function in its own ``cli`` module, listed in COMMAND_MODULES (imported plainly, so the import graph
sees them); the handler set with ``set_defaults(func=...)`` receives the parsed namespace and
returns an exit code.
"""

from __future__ import annotations

import argparse
import signal
import sys

from encoderlab.data import cli as data_cli
from encoderlab.eval import cli as eval_cli
from encoderlab.generate import cli as generate_cli
from encoderlab.interop import cli as interop_cli
from encoderlab.models import cli as models_cli
from encoderlab.study import cli as study_cli
from encoderlab.train import cli as train_cli
from encoderlab.transfer import cli as transfer_cli

# In the order `encoderlab --help` lists their commands.
COMMAND_MODULES = [models_cli, interop_cli, data_cli, train_cli, eval_cli, generate_cli, study_cli, transfer_cli]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="encoderlab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(sub)
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
