"""The time model against published runs: the fitted shares, every fit point's residual, and the held-out
comparison on chips the fit never saw (the README's table).

    .venv/bin/python benchmarks/timing_heldout.py [--markdown]

Not a timing benchmark: it reads kvcore/timing_runs.yaml (and the bundled recordings it names), fits with
kvcore.timing_fit and prints predicted vs measured tokens/s per point; error = predicted / measured - 1.
Acceptance (issue 17): held-out decode within ~25 % and prompt processing within ~35 % (median |error|),
the worst point within 2x.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kvcore import timing_fit  # noqa: E402

KIND = {"pp": "prompt", "tg": "decode"}


def rows(cal: timing_fit.Calibration, split: str) -> list[dict]:
    out = []
    for p in cal.fit_points if split == timing_fit.FIT else cal.held_out:
        eff = cal.efficiency_for(p.chip, p.runtime)
        pred = p.predicted(eff)
        if pred is None:
            continue
        where = f"{p.tokens:,}" + (f" after {p.depth:,}" if p.depth else "")
        out.append(
            {
                "run": p.run,
                "chip": p.chip.chip,
                "runtime": p.runtime,
                "model": p.model,
                "format": p.weights_format,
                "kind": KIND[p.kind],
                "tokens": where,
                "measured": f"{p.measured:,.1f}",
                "predicted": f"{pred:,.1f}",
                "error": f"{pred / p.measured - 1:+.0%}",
                "bound": p.step(eff).bound,
                "grade": p.grade,
                "source": p.url,
            }
        )
    return out


def shares_text(cal: timing_fit.Calibration) -> str:
    bw = ", ".join(
        f"{family} on {'an Ultra' if dies == 2 else 'one die'} {share:.1%}"
        for (family, dies), share in cal.bandwidth.items()
    )
    return (
        f"compute share {cal.compute:.1%} of peak FP16; bandwidth share {bw}; "
        f"fixed time per decode step {cal.overhead_s * 1e3:.1f} ms; {cal.source}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print markdown tables (the README's)")
    args = ap.parse_args()
    cal = timing_fit.calibration()
    cols = [
        "run",
        "chip",
        "runtime",
        "model",
        "format",
        "kind",
        "tokens",
        "measured",
        "predicted",
        "error",
        "bound",
        "grade",
        "source",
    ]
    print(shares_text(cal) + "\n")
    for split, title in (
        (timing_fit.HELD_OUT, "Held out (chips the fit never saw)"),
        (timing_fit.FIT, "Fitted on (residuals)"),
    ):
        table = rows(cal, split)
        summary = timing_fit.summary(
            list(cal.held_out if split == timing_fit.HELD_OUT else cal.fit_points), cal
        )
        said = "; ".join(
            f"{KIND[k]}: {v['points']} points, median |error| {v['median_abs_error']:.0%}, worst "
            f"{v['worst_ratio']:.2f}x"
            for k, v in summary.items()
        )
        print(f"{title}: {said}\n")
        if args.markdown:
            print("| " + " | ".join(cols) + " |")
            print(
                "|"
                + "|".join(
                    "---:" if c in ("measured", "predicted", "error", "tokens") else ":---"
                    for c in cols
                )
                + "|"
            )
            for r in table:
                print("| " + " | ".join(str(r[c]) for c in cols) + " |")
        else:
            for r in table:
                print(
                    f"  {r['error']:>5}  {r['kind']:<7}{r['chip']:<22}{r['model']:<16}{r['format']:<12}{r['tokens']:>16}"
                    f"  measured {r['measured']:>8}  predicted {r['predicted']:>8}  {r['source']}"
                )
        print()


if __name__ == "__main__":
    main()
