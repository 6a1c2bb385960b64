"""Install torch into the current interpreter without pulling a multi-GB CUDA build by accident.

If torch is already importable, nothing happens. If pip's configured find-links hold a local
CPU wheel (this project's CI machines keep ``torch-2.13.0+cpu`` on disk), that version is
pinned so pip takes it; otherwise a normal ``pip install torch`` runs. Set ENCODERLAB_TORCH to a
requirement (e.g. ``torch==2.5.1``) to choose yourself.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import subprocess
import sys


def pip(*args: str) -> int:
    return subprocess.call([sys.executable, "-m", "pip", "install", "-q", *args])


def local_cpu_wheel_version() -> str | None:
    out = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True
    ).stdout
    dirs = re.findall(r"find-links='([^']*)'", out) + os.environ.get("PIP_FIND_LINKS", "").split()
    for d in " ".join(dirs).split():
        d = d.removeprefix("file://")
        for wheel in sorted(glob.glob(os.path.join(d, "torch-*+cpu-*.whl"))):
            return os.path.basename(wheel).split("-")[1].split("+")[0]
    return None


def main() -> int:
    if importlib.util.find_spec("torch") is not None:
        return 0
    wanted = os.environ.get("ENCODERLAB_TORCH")
    if wanted:
        return pip(wanted)
    version = local_cpu_wheel_version()
    if version:
        print(f"install_torch: using the local CPU wheel torch=={version}")
        return pip(f"torch=={version}")
    print("install_torch: no local CPU wheel found; installing torch from the index")
    return pip("torch")


if __name__ == "__main__":
    sys.exit(main())
