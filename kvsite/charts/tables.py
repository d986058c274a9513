"""Tables for readers: a DataFrame as the Arrow table Streamlit sends, as a small markdown table, as CSV bytes.

Example: md_table(df, {"format": ("Format", None), "vs_fp16": ("x fp16", "{:.3f}")})
"""

from __future__ import annotations

import re

import pandas as pd
import pyarrow as pa

from kvsite.i18n import data_text

_PIPE = re.compile(r"(?<!\\)\|")  # a pipe not escaped yet: it would end the table's cell


def csv_number(value) -> str:
    """A number as a CSV cell, in the site's number format (kvcore.units.fmt_num: whole numbers in full, others
    to 4 significant figures) without thousands separators, so a spreadsheet still reads it as a number.

    Example: csv_number(8.03125) -> '8.031'; csv_number(1073741824.0) -> '1073741824'; csv_number(0.1 + 0.2) -> '0.3'.
    """
    from kvcore.units import fmt_num

    return fmt_num(value, 4).replace(",", "") if value == value else ""


def csv_bytes(df: pd.DataFrame, notes: tuple[str, ...] = ()) -> bytes:
    """The table as CSV that Excel opens as it is (a Japanese Mac's too) and a program reads: UTF-8 with a byte-order
    mark (without one Excel reads the bytes as Shift_JIS), `notes` first, each a row `#,<note>` (the note one quoted
    cell, its commas kept: Excel shows it whole beside the #, and pd.read_csv(path, comment="#") skips the row), then
    the table with readable numbers.

    Example: csv_bytes(df, ("Title", "Settings: context: 32,768")) ->
        b'\xef\xbb\xbf#,Title\n#,"Settings: context: 32,768"\ntokens,mib\n...'
    """
    import csv
    import io

    out = df.copy()
    for col in out.columns:
        if pd.api.types.is_float_dtype(out[col]):
            out[col] = out[col].map(csv_number)
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(["#", note] for note in notes if note)
    out.to_csv(text, index=False, lineterminator="\n")
    return text.getvalue().encode("utf-8-sig")


def readable(df: pd.DataFrame) -> pd.DataFrame:
    """Numbers as the site shows them (kvcore.units.fmt_num: whole numbers in full with thousands separators, others
    to 3 significant figures), for a table a reader reads rather than sorts: 8192 -> '8,192', 590.2341 -> '590'."""
    from kvcore.units import fmt_num

    out = df.copy()
    for col in out.columns:
        if pd.api.types.is_numeric_dtype(out[col]) and not pd.api.types.is_bool_dtype(out[col]):
            out[col] = out[col].map(lambda v: fmt_num(v) if v == v else "—")
    return out


def md_table(
    df: pd.DataFrame,
    columns: dict[str, tuple[str, str | None]],
    lang: str = "en",
    right: tuple[str, ...] = (),
) -> str:
    """A small table as a markdown table: columns maps a field to (header, format spec such as "{:.3f}", or
    None for text). Number columns align right, and the fields in `right` (numbers already written as text). For a
    handful of rows shown among prose, where st.dataframe's grid costs three markdown elements a rerun and scrolls;
    build it inside a cached section."""

    def cell(value, fmt):
        if value is None or (isinstance(value, float) and value != value):
            return "—"
        text = (
            fmt.format(value) if fmt else data_text(lang, str(value))
        )  # a data file's own words, rendered
        return _PIPE.sub(r"\\|", text).replace(
            "\n", " "
        )  # a pipe escaped once (kvsite.layout.plain's too)

    lines = [
        "| " + " | ".join(head.replace("|", "\\|") for head, _ in columns.values()) + " |",
        "|"
        + "|".join(
            "---:" if name in right or pd.api.types.is_numeric_dtype(df[name]) else ":---"
            for name in columns
        )
        + "|",
    ]
    lines += [
        "| " + " | ".join(cell(row[name], fmt) for name, (_, fmt) in columns.items()) + " |"
        for row in df[list(columns)].to_dict("records")
    ]
    return "\n".join(lines)


def arrow(df: pd.DataFrame) -> pa.Table:
    """A DataFrame as the Arrow table st.dataframe would build from it, built once inside a cached section
    (st.dataframe sends an Arrow table as it is, instead of converting the DataFrame on every rerun)."""
    from streamlit import dataframe_util

    return pa.ipc.open_stream(dataframe_util.convert_pandas_df_to_arrow_bytes(df)).read_all()
