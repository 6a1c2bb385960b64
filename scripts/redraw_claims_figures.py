"""Draw a written study report's figures again from its report.json with the present plotting code
(study/plots.py), touching nothing else: report.json and report.md stay as they are (report.md names
the figures by file, and the file names do not change).

    .venv/bin/python scripts/redraw_claims_figures.py docs/studies/claims [more report folders]

The claims' figures are drawn from the claims as the present claim code derives them from the stored
results (report.claims_of, as ``encoderlab study-claims`` does); where those differ from the claims the
report.json holds in what a figure shows (comparisons, signal, a drawn claim's verdict), it says so and
draws nothing: run ``encoderlab study-claims FOLDER`` first (it draws the claims' figures itself), so
that figures and text agree. Only the figures the folder already has are replaced, and only those whose
pixels changed; it prints their names."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from encoderlab.study.plots import claim_curves, forest_plot, study_figures  # noqa: E402
from encoderlab.study.report import claims_of  # noqa: E402
from encoderlab.study.results import load_report  # noqa: E402


def redraw(folder: Path) -> list[str]:
    results, rest = load_report(folder / "report.json")
    claims = claims_of(results.config, results)
    if [_drawn(c.to_json()) for c in claims] != [_drawn(c) for c in rest.get("claims", [])]:
        raise SystemExit(f"{folder}: the present claim code derives other comparisons or verdicts than report.json "
                         f"holds; run `encoderlab study-claims {folder}` first")
    margin = results.config.get("equivalence_margin", 0.01)
    with tempfile.TemporaryDirectory() as tmp:  # draw all, then replace only the figures the report has
        out = Path(tmp)
        drawn = study_figures(results, out) + [f for f in (forest_plot(claims, out, margin),
                                                            claim_curves(claims, results.variants, out)) if f]
        changed = [f for f in drawn if (folder / f).exists() and not _same_pixels(folder / f, out / f)]
        for f in changed:
            (folder / f).write_bytes((out / f).read_bytes())
    return changed


def _drawn(claim: dict) -> dict:
    """What the claims' figures show of a claim (report.json's form): its comparisons and signal, and
    its verdict where a comparison has an estimate (a panel's title); a note or a verdict without one
    is in no figure."""
    shown = any("estimate" in x for x in claim.get("comparisons", []))
    return {"claim": claim["claim"], "comparisons": claim.get("comparisons", []), "signal": claim.get("signal", {}),
            **({"verdict": claim["verdict"]} if shown else {})}


def _same_pixels(a: Path, b: Path) -> bool:
    """Whether two PNGs show the same image (a figure whose code did not change is left as committed)."""
    import numpy as np
    from matplotlib.image import imread

    x, y = imread(a), imread(b)
    return x.shape == y.shape and bool(np.array_equal(x, y))


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["docs/studies/claims"]:
        print(f"{arg}: " + (", ".join(redraw(Path(arg))) or "no figure changed"))
