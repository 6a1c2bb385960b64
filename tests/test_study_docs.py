"""The committed docs say what the committed reports say: every verdict table marked in docs/results.md
and the studies' READMEs is study.doc_tables.verdict_table of its report.json, as the present claim code
derives it; and the figures issue 32 found misquoted are quoted as their reports have them."""

from __future__ import annotations

import json
import re
from pathlib import Path

from encoderlab.study.doc_tables import variant_table, verdict_table
from encoderlab.study.report import claims_of
from encoderlab.study.results import StudyResults

ROOT = Path(__file__).resolve().parents[1]
# Where verdict and variant tables and quoted intervals live (scripts/verdict_tables.py writes the same).
DOCS = [ROOT / "README.md", ROOT / "docs" / "results.md", *sorted((ROOT / "docs" / "studies").glob("*/README.md"))]


def test_readme_verdict_tables_are_generated_from_their_reports():
    blocks = []
    for readme in DOCS:
        blocks += re.findall(r"<!-- verdicts: (\S+) -->\n(.*?)<!-- /verdicts -->", readme.read_text(), re.S)
    folders = [folder for folder, _ in blocks]
    assert {"docs/studies/claims-deep", "docs/studies/claims-deep-all"} <= set(folders)
    assert folders.count("docs/studies/claims-deep-all") == 2  # results.md and its own README
    for folder, table in blocks:
        results = StudyResults.from_json(json.loads((ROOT / folder / "report.json").read_text()))
        assert table.rstrip("\n").split("\n") == verdict_table(claims_of(results.config, results)), folder


def test_readme_variant_tables_are_generated_from_their_reports():
    blocks = []
    for readme in DOCS:
        blocks += re.findall(r"<!-- variants: (\S+) -->\n(.*?)<!-- /variants -->", readme.read_text(), re.S)
    assert "docs/studies/claims-generator" in {folder for folder, _ in blocks}
    for folder, table in blocks:
        results = StudyResults.from_json(json.loads((ROOT / folder / "report.json").read_text()))
        assert table.rstrip("\n").split("\n") == variant_table(results), folder


def test_figures_issue_32_found_misquoted_match_their_reports():
    def report(folder):
        return json.loads((ROOT / "docs" / "studies" / folder / "report.json").read_text())

    deep = (ROOT / "docs" / "studies" / "claims-deep" / "README.md").read_text()
    lat = next(c for c in report("claims-deep")["claims"] if c["claim"] == 2)["numbers"]
    assert f"{lat['albert/bert latency fp32_b32']:.2f}x (batch 32)" in deep and "1.26x" not in deep
    aucs = [f"{e['eval_disc_auc']:.3f}" for e in report("claims-deep")["variants"]["electra"]["curve"]["eval"]]
    assert f"{', '.join(aucs[4:7])} and {aucs[7]}" in deep  # the length-128 half of the AUC trajectory, 0.798 included
    rope = (ROOT / "docs" / "studies" / "claims-rope" / "README.md").read_text()
    assert f"majority class's {report('claims-rope')['baselines']['mrpc']['majority']:.3f} (F1 0.812" in rope
    assert "STS-B Pearson" not in rope
    sentence = (ROOT / "docs" / "studies" / "claims-rope-sentence" / "README.md").read_text()
    held = [f"{report(f)['variants']['bert']['curve']['eval'][-1]['eval_mlm_accuracy']:.4f}"
            for f in ("claims-rope", "claims-rope-sentence")]
    assert f"{held[0]} there, {held[1]} here" in sentence and "numerics differ by CPU kind" not in sentence
    assert "1.06-1.26x" not in (ROOT / "docs" / "results.md").read_text()


def test_every_interval_the_docs_quote_is_one_a_committed_report_derives():
    """A "difference [low, high]" in docs/results.md or a study's README is, to the third decimal, an
    estimate that the present code derives from a committed report.json: a comparison, a per-task row,
    a claim's signal test, a not-testable claim's comparison over every task, or a variant against the
    random-init control. A figure of a superseded rule
    or a hand-computed one fails here: quote it without its interval, saying what it was."""
    from encoderlab.study.report import _against_control

    def rounded(e):
        return tuple(round(e[k], 3) for k in ("diff", "lo", "hi"))

    known = set()
    for path in sorted((ROOT / "docs" / "studies").glob("*/report.json")):
        results = StudyResults.from_json(json.loads(path.read_text()))
        for c in claims_of(results.config, results):
            c = c.to_json()
            known |= {rounded(x["estimate"]) for x in c.get("comparisons", []) if "estimate" in x}
            known |= {rounded(t["estimate"]) for x in c.get("comparisons", []) for t in x["per_task"].values()
                      if "estimate" in t}
            known |= {rounded(t["estimate"]) for t in c.get("signal", {}).values() if "estimate" in t}
            known |= {rounded(x["estimate"]) for x in c.get("untested", []) if "estimate" in x}
        known |= {rounded(e.to_json()) for tests in _against_control(results.variants, results.controls).values()
                  for _, e in tests.values() if e is not None}
    quoted = re.compile(r"([+-]\d\.\d{3}) (?:[A-Za-z]+ )?\[([+-]\d\.\d{3}), ([+-]\d\.\d{3})\]")
    for doc in DOCS:
        for m in quoted.finditer(doc.read_text()):
            assert tuple(float(x) for x in m.groups()) in known, (doc.relative_to(ROOT), m.group(0))
