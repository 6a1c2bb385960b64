"""The committed docs say what the committed reports say: the README's verdict table for
docs/studies/claims-deep-all is study.report.verdict_table of its report.json, as the present claim
code derives it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from encoderlab.study.report import claims_of, verdict_table
from encoderlab.study.results import StudyResults

ROOT = Path(__file__).resolve().parents[1]


def test_readme_verdict_tables_are_generated_from_their_reports():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"<!-- verdicts: (\S+) -->\n(.*?)<!-- /verdicts -->", readme, re.S)
    assert [folder for folder, _ in blocks] == ["docs/studies/claims-deep-all"]
    for folder, table in blocks:
        results = StudyResults.from_json(json.loads((ROOT / folder / "report.json").read_text()))
        assert table.rstrip("\n").split("\n") == verdict_table(claims_of(results.config, results)), folder
