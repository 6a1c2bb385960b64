"""docs/architecture.md's layout follows the code: every package and top-level module of encoderlab/
is named at its top level, every module of study/ in study's section, and every name there exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "encoderlab"


def _layout() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    start = text.index("\nencoderlab/\n")
    return text[start + 1:text.index("\ntests/", start)]


def test_the_top_level_of_the_layout_is_the_package():
    named = set(re.findall(r"^  (\w+(?:\.py|/))", _layout(), re.M))
    here = {p.name + "/" for p in PKG.iterdir() if p.is_dir() and any(p.glob("*.py"))}  # namespace packages too
    here |= {p.name for p in PKG.glob("*.py") if p.name not in ("__init__.py", "__main__.py")}
    assert here - named == set(), "in encoderlab/ but not in docs/architecture.md's layout"
    assert named - here == set(), "in docs/architecture.md's layout but not in encoderlab/"


def test_every_study_module_is_in_its_section():
    layout = _layout()
    section = re.search(r"^  study/.*?(?=^  \w)", layout, re.M | re.S).group(0)
    named = set(re.findall(r"\b(\w+\.py)\b", section))
    here = {p.name for p in (PKG / "study").glob("*.py") if p.name != "__init__.py"}
    assert here - named == set(), "study/ modules missing from docs/architecture.md"
    assert named - here == set(), "docs/architecture.md names study/ modules that do not exist"
