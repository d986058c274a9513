"""The time model against published runs: the fitted shares, every fit point's residual, and the held-out
comparison on chips the fit never saw (the table in docs/methods.md).

    .venv/bin/python benchmarks/timing_heldout.py [--markdown [PATH]]

`--markdown` prints the tables in markdown; `--markdown docs/methods.md` writes the shares and the
held-out table, with the command and commit, into its section of that page
(benchmarks/doc_tables.py), where tests/test_timing_fit.py holds it to what this prints now.

Not a timing benchmark: it reads kvcore/fits/timing_runs.yaml (and the bundled recordings it names), fits with
kvcore.fits.shares and prints predicted vs measured tokens/s per point; error = predicted / measured - 1.
Acceptance (issue 17): held-out decode within ~25 % and prompt processing within ~35 % (median |error|),
the worst point within 2x.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.doc_tables import Section, markdown_path  # noqa: E402
from kvcore.fits import shares as timing_fit  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--markdown",
        nargs="?",
        const="-",
        metavar="PATH",
        help="markdown tables: printed, or the held-out one written into its section of PATH "
        "(docs/methods.md)",
    )
    args = ap.parse_args()
    section = Section(markdown_path(args.markdown), "timing_heldout", False)
    cal = timing_fit.calibration()
    cols = timing_fit.TABLE_COLUMNS
    doc = [
        timing_fit.shares_text(cal),
        "",
    ]  # what the page holds: the shares, both summaries, held-out rows
    print(timing_fit.shares_text(cal) + "\n")
    for split, title in (
        (timing_fit.HELD_OUT, "Held out (chips the fit never saw)"),
        (timing_fit.FIT, "Fitted on (residuals)"),
    ):
        table = timing_fit.table_rows(cal, split)
        summary = timing_fit.summary(
            list(cal.held_out if split == timing_fit.HELD_OUT else cal.fit_points), cal
        )
        said = "; ".join(
            f"{timing_fit.KIND[k]}: {v['points']} points, median |error| {v['median_abs_error']:.0%}, worst "
            f"{v['worst_ratio']:.2f}x"
            for k, v in summary.items()
        )
        print(f"{title}: {said}\n")
        doc += [f"{title}: {said}", ""]
        if args.markdown:
            lines = ["| " + " | ".join(cols) + " |"]
            lines.append(
                "|"
                + "|".join(
                    "---:" if c in ("measured", "predicted", "error", "tokens") else ":---"
                    for c in cols
                )
                + "|"
            )
            lines += [timing_fit.markdown_row(r) for r in table]
            print("\n".join(lines))
            if split == timing_fit.HELD_OUT:
                doc += [*lines, ""]
        else:
            for r in table:
                print(
                    f"  {r['error']:>5}  {r['kind']:<7}{r['chip']:<22}{r['model']:<16}{r['format']:<12}{r['tokens']:>16}"
                    f"  measured {r['measured']:>8}  predicted {r['predicted']:>8}  {r['source']}"
                )
        print()
    section.write("\n".join(doc))


if __name__ == "__main__":
    main()
