"""The bad-input property tests with many examples (`make test` runs a few of each).

    python benchmarks/property_sweep.py              # 500 examples per property (the "sweep" profile)
    python benchmarks/property_sweep.py -- -x -k csv  # extra pytest arguments after --

The profiles are registered in tests/conftest.py; see docs/reliability.md for what each test covers.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ["tests/test_bad_input_corpus.py", "tests/test_bad_input_tasks_config.py",
         "tests/test_bad_input_checkpoints.py"]


def main() -> int:
    extra = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else []
    env = dict(os.environ, HYPOTHESIS_PROFILE="sweep", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    return subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *FILES, *extra],
                           cwd=ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main())
