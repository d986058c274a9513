"""The decode fit on every bundled published run: effective bandwidth, fixed cost, residuals and verdict,
and where the run sits against the bytes model (measured slowdown ÷ predicted at its longest context).

    .venv/bin/python benchmarks/published_fits.py [--markdown [PATH]]

`--markdown` prints the table in markdown; `--markdown docs/methods.md` writes it, with the command
and commit, into its section of that page (benchmarks/doc_tables.py).

Not a timing benchmark: it reads the recordings and fits time/token = bytes/BW_eff (+ c, with 3+ points)
with kvcore.fits.decode.fit_run, the same fit the Decode page shows. Residuals are (measured - fitted) /
measured time per token, one per stated point, in context order. Runs without a model geometry (an
unsupported architecture, an unusual model) are listed with "no fit" and why.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.doc_tables import Section, add_option, markdown_path  # noqa: E402
from kvcore.fits import decode as decode_runs
from kvcore.recordings import store as recordings  # noqa: E402


def rows() -> list[dict]:
    recs, errors = recordings.load_all([recordings.BUNDLED_DIR])
    if errors:
        raise SystemExit("\n".join(errors))
    summary = decode_runs.slowdown_summary(decode_runs.slowdown_vs_bytes(recs)).set_index(
        "recording"
    )
    out = []
    for rec in recs:
        if rec.kind != "published" or not rec.has("decode"):
            continue
        fit, chip = decode_runs.fit_run(rec), decode_runs.chip_for(rec)
        c = rec.data["citation"]
        row = {
            "run": rec.id,
            "grade": c.get("grade", "—"),
            "chip": rec.data.get("hardware", {}).get("chip", "—"),
            "points": len(rec.rows("decode")),
            "contexts": f"{rec.rows('decode')[0]['context']:,}–{rec.rows('decode')[-1]['context']:,}",
        }
        if fit is None:
            model = rec.data["model"]
            kind = (
                "hybrid model"
                if model.get("hybrid")
                else "unusual model"
                if model.get("unusual")
                else "model"
            )
            row.update(fit="no fit", why=f"no fit: {kind} without a kvcore geometry")
        else:
            row.update(
                fit=f"{fit.bandwidth_gbps:.0f} GB/s"
                + (f" of {chip.bandwidth_gbps:g}" if chip else ""),
                overhead=f"{fit.overhead_s * 1e3:.2f} ms" if fit.fitted_overhead else "—",
                residuals=" ".join(f"{r:+.1%}" for r in fit.residuals),
                rms=f"{fit.rms_residual:.1%}",
                verdict=fit.verdict_code,
            )
            if rec.id in summary.index:
                s = summary.loc[rec.id]
                row["slowdown"] = (
                    f"{s['measured_slowdown']:.2f}× vs {s['predicted_slowdown']:.2f}× ({s['ratio']:.2f})"
                )
        out.append(row)
    return out


def markdown(table: list[dict]) -> str:
    """The table as docs/methods.md holds it (tests/test_docs.py compares the two)."""
    cols = [
        "run",
        "grade",
        "chip",
        "points",
        "contexts",
        "fit",
        "overhead",
        "rms",
        "verdict",
        "slowdown",
        "residuals",
    ]
    heads = [
        "run",
        "grade",
        "chip",
        "points",
        "contexts",
        "BW_eff (of peak)",
        "fixed",
        "RMS",
        "verdict",
        "measured vs predicted slowdown (ratio)",
        "residuals",
    ]
    lines = ["| " + " | ".join(heads) + " |"]
    lines.append("|" + "|".join("---:" if c in ("points",) else ":---" for c in cols) + "|")
    for r in table:
        cells = [str(r.get(c, r.get("why", "—") if c == "verdict" else "—")) for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_option(ap, printed=True)
    args = ap.parse_args()
    section = Section(markdown_path(args.markdown), "published_fits", False)
    table = rows()
    if args.markdown:
        text = markdown(table)
        if section.path is None:
            print(text)
        section.write(text)
        return
    for r in table:
        print(f"{r['run']}  [{r['grade']}, {r['chip']}, {r['points']} points, {r['contexts']}]")
        if r["fit"] == "no fit":
            print(f"    {r['why']}")
            continue
        print(f"    BW_eff {r['fit']}, fixed {r['overhead']}, RMS {r['rms']}, {r['verdict']}")
        print(f"    residuals {r['residuals']}")
        if "slowdown" in r:
            print(f"    slowdown at the longest context: measured vs predicted {r['slowdown']}")


if __name__ == "__main__":
    main()
