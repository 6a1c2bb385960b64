"""Regenerate every verdict table and per-variant table marked in README.md and the docs from its report.json (the
form tests/test_study_docs.py checks): ``<!-- verdicts: FOLDER -->`` ... ``<!-- /verdicts -->`` and
``<!-- variants: FOLDER -->`` ... ``<!-- /variants -->``.

    python scripts/verdict_tables.py        # after `encoderlab study-claims FOLDER` changed a report
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from encoderlab.study.doc_tables import variant_table, verdict_table
from encoderlab.study.report import claims_of
from encoderlab.study.results import StudyResults

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(<!-- (verdicts|variants): (\S+) -->\n)(.*?)(<!-- /\2 -->)", re.S)


def table(kind: str, folder: str) -> str:
    results = StudyResults.from_json(json.loads((ROOT / folder / "report.json").read_text()))
    rows = verdict_table(claims_of(results.config, results)) if kind == "verdicts" else variant_table(results)
    return "\n".join(rows) + "\n"


def main() -> None:
    for doc in [ROOT / "README.md", ROOT / "docs" / "results.md",
                *sorted((ROOT / "docs" / "studies").glob("*/README.md"))]:
        text = doc.read_text()
        new = BLOCK.sub(lambda m: m.group(1) + table(m.group(2), m.group(3)) + m.group(5), text)
        if new != text:
            doc.write_text(new)
            print(f"{doc.relative_to(ROOT)}: tables regenerated")


if __name__ == "__main__":
    main()
