"""Peak memory of the corpus readers at their limits: a single 100 MB line, and a large file streamed.

Each case runs in a fresh child process; its peak resident memory (``ru_maxrss`` from ``wait4``) is
compared with a child that only imports the reader, so the number is what reading costs. The
files are generated in a temporary directory (by repeating a block) and deleted afterwards.

    python benchmarks/reliability_limits.py                  # 100 MB line + 2 GB stream
    python benchmarks/reliability_limits.py --stream-mb 500  # a smaller stream

Results (with date and machine) go to docs/reliability.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

READ = """
import sys, time
from encoderlab.data.corpus import Corpus, CorpusConfig
start = time.perf_counter()
docs = chars = longest = 0
corpus = Corpus(CorpusConfig(paths=(sys.argv[1],), doc_split=sys.argv[2]))
for doc in corpus:
    docs += 1
    chars += len(doc)
    longest = max(longest, len(doc))
print(docs, chars, longest, corpus.stats.split_documents, time.perf_counter() - start)
"""
IMPORT_ONLY = "import encoderlab.data.corpus"


def _child(code: str, *args: str) -> tuple[str, float]:
    """Run ``code`` in a child; return its stdout and peak RSS in MB."""
    proc = subprocess.Popen([sys.executable, "-c", code, *args], cwd=ROOT, stdout=subprocess.PIPE,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    out = proc.stdout.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"child failed ({status}): {code[:60]}")
    return out, usage.ru_maxrss / 1024  # Linux reports KiB


def _write_repeated(path: Path, block: bytes, total: int) -> None:
    with open(path, "wb") as f:
        for _ in range(total // len(block)):
            f.write(block)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--line-mb", type=int, default=100)
    ap.add_argument("--stream-mb", type=int, default=2048)
    args = ap.parse_args()
    _, base = _child(IMPORT_ONLY)
    print(f"{time.strftime('%Y-%m-%d')}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}; baseline (import only) peak RSS {base:.0f} MB")
    with tempfile.TemporaryDirectory() as d:
        line = Path(d) / "one_line.txt"
        _write_repeated(line, b"word " * 200_000, args.line_mb << 20)  # no newline anywhere
        out, peak = _child(READ, str(line), "line")
        docs, chars, longest, split, secs = out.split()
        print(f"single {args.line_mb} MB line: {int(docs):,} documents (longest {int(longest):,} chars, "
              f"{split} splits) in {float(secs):.1f}s; peak RSS {peak:.0f} MB (+{peak - base:.0f} MB over baseline)")
        line.unlink()

        big = Path(d) / "stream.txt"
        block = b"".join(b"a sentence of some words, number %d, in a paragraph.\n\n" % i for i in range(20_000))
        _write_repeated(big, block, args.stream_mb << 20)
        out, peak = _child(READ, str(big), "blank_line")
        docs, chars, longest, split, secs = out.split()
        mb = big.stat().st_size / 2**20
        print(f"{mb:,.0f} MB file streamed: {int(docs):,} documents in {float(secs):.1f}s "
              f"({mb / float(secs):.0f} MB/s); peak RSS {peak:.0f} MB (+{peak - base:.0f} MB over baseline)")


if __name__ == "__main__":
    main()
