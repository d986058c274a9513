"""What a smaller KV cache costs the real SmolLM2-135M, as docs/methods.md shows it: the quality
tables read from the bundled recordings (the mlx_lm run and the llama.cpp run), never typed by hand.

    .venv/bin/python benchmarks/quality_tables.py [--markdown docs/methods.md]

Not a timing benchmark: the figures are the recordings' (made by scripts/record_smollm2.py and
`kvcore quality --runtime llama.cpp`, their commands in their provenance); this prints the two
tables, or writes them into their sections of the page (benchmarks/doc_tables.py), where
tests/test_docs.py holds them to what this prints now.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.doc_tables import Section, table  # noqa: E402

MLX = ROOT / "recordings" / "measured-linux-cpu-smollm2-135m.yaml"
LLAMACPP = ROOT / "recordings" / "measured-linux-cpu-llamacpp-smollm2-135m-quality.yaml"
SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def kl_text(value: float) -> str:
    """KL in nats as the page writes it: 0, 0.128, 6.7×10⁻⁴, 4.0×10⁻³, 1×10⁻⁶ (recorded 1e-06)."""
    if value == 0:
        return "0"
    if value >= 0.01:
        return f"{value:.3f}"
    digits = (
        0 if float(f"{value:.0e}") == value else 1
    )  # 1e-06 as recorded: no second digit to show
    mantissa, exponent = f"{value:.{digits}e}".split("e")
    return f"{mantissa}×10{str(int(exponent)).translate(SUPERSCRIPT)}"


def both(values: list[str]) -> str:
    """One figure when the runs agree, else each run's, in token order."""
    return values[0] if len(set(values)) == 1 else " / ".join(values)


def _rows(path: Path) -> list[dict]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))["sections"]["quality"]


def _mlx_name(row: dict, baseline: str) -> str:
    fmt = row["kv_format"]
    if fmt == baseline:
        return f"{fmt} (the baseline on CPU)"
    if fmt.startswith("mlx-q"):
        return f"mlx {row['bits']}-bit, group {row['group_size']}"
    return fmt


def mlx_table() -> str:
    rows = _rows(MLX)
    tokens = sorted({r["tokens"] for r in rows})
    baseline = next(
        r["kv_format"] for r in rows if r["kl_vs_baseline"] == 0 and r["tokens"] == tokens[0]
    )
    by_cache: dict[tuple, dict[int, dict]] = {}
    for r in rows:
        by_cache.setdefault((r["kv_format"], r.get("group_size")), {})[r["tokens"]] = r
    order = sorted(by_cache.values(), key=lambda runs: -runs[tokens[0]]["bytes_per_token"])
    per = " / ".join(f"{t:,}" for t in tokens)
    heads = [
        "KV cache",
        "bytes/token",
        f"perplexity ({per})",
        f"KL vs unquantized ({per})",
        f"top-1 agreement ({per})",
    ]
    cells = []
    for runs in order:
        at = [runs[t] for t in tokens]
        cells.append(
            [
                _mlx_name(at[0], baseline),
                f"{at[0]['bytes_per_token']:,.0f}",
                " / ".join(f"{r['perplexity']:.2f}" for r in at),
                both([kl_text(r["kl_vs_baseline"]) for r in at]),
                both([f"{r['top1_agreement']:.1%}".replace("100.0%", "100%") for r in at]),
            ]
        )
    return table(heads, cells)


def llamacpp_table() -> str:
    rows = _rows(LLAMACPP)
    heads = [
        "llama.cpp cache",
        "bytes/token",
        "perplexity",
        "KL vs its f16 cache",
        "top-1 agreement",
    ]
    cells = [
        [
            "f16 (a second run of the baseline's type)"
            if r["kv_format"] == "f16"
            else r["kv_format"],
            f"{r['bytes_per_token']:,.0f}",
            f"{r['perplexity']:.2f}",
            kl_text(r["kl_vs_baseline"]),
            f"{r['top1_agreement']:.1%}".replace("100.0%", "100%"),
        ]
        for r in rows
    ]
    return table(heads, cells)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--markdown",
        metavar="PATH",
        help="write the two tables into their sections of this page (docs/methods.md)",
    )
    a = ap.parse_args()
    sections = {
        "quality_mlx": (Section(a.markdown, "quality_mlx", False, "quality_tables"), mlx_table()),
        "quality_llamacpp": (
            Section(a.markdown, "quality_llamacpp", False, "quality_tables"),
            llamacpp_table(),
        ),
    }
    for section, text in sections.values():
        print(text + "\n")
        section.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
