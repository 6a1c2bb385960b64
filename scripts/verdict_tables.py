"""Regenerate every verdict table marked in the docs from its report.json (the form
tests/test_study_docs.py checks): ``<!-- verdicts: FOLDER -->`` ... ``<!-- /verdicts -->``.

    python scripts/verdict_tables.py        # after `encoderlab study-claims FOLDER` changed a report
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from encoderlab.study.report import claims_of, verdict_table
from encoderlab.study.results import StudyResults

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(<!-- verdicts: (\S+) -->\n)(.*?)(<!-- /verdicts -->)", re.S)


def table(folder: str) -> str:
    results = StudyResults.from_json(json.loads((ROOT / folder / "report.json").read_text()))
    return "\n".join(verdict_table(claims_of(results.config, results))) + "\n"


def main() -> None:
    for doc in [ROOT / "docs" / "results.md", *sorted((ROOT / "docs" / "studies").glob("*/README.md"))]:
        text = doc.read_text()
        new = BLOCK.sub(lambda m: m.group(1) + table(m.group(2)) + m.group(4), text)
        if new != text:
            doc.write_text(new)
            print(f"{doc.relative_to(ROOT)}: verdict tables regenerated")


if __name__ == "__main__":
    main()
