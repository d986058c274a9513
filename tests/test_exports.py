"""Exported charts stand alone: title, settings and source inside the image, Japanese glyphs drawn from the font
the site ships (no system font needed), nothing cut at the right edge; CSVs with readable numbers and a source."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]

RENDER = textwrap.dedent("""
    import hashlib, sys
    sys.path.insert(0, {root!r})
    import vl_convert as vlc
    if {site}:
        from kvsite.charts.chart import Export, png_bytes as render
    else:  # vl-convert alone, nothing registered: what a host with no fonts draws
        render = lambda spec, about=None: vlc.vegalite_to_png(spec, scale=1)
        Export = lambda title, lines=(): None
    for word in ("日本語のグラフ", "漢字書体の確認"):
        spec = {{"data": {{"values": [{{"a": word, "b": 1}}]}}, "mark": "bar",
                 "encoding": {{"x": {{"field": "a", "type": "nominal"}}, "y": {{"field": "b", "type": "quantitative"}}}}}}
        print(hashlib.sha256(render(spec, about=Export(word, ("出典：" + word,)))).hexdigest())
""")


FONT_DIRS = (
    "/usr/share/fonts",
    "/usr/local/share/fonts",
)  # where vl-convert finds system fonts on Linux


def _render_without_system_fonts(tmp_path, site: bool) -> list[str]:
    """The renders in a process that sees no font: an empty fontconfig, a fresh HOME, and (as root, in a mount
    namespace of its own) empty folders over the system's font folders, as on a host that installed none."""
    conf = tmp_path / "fonts.conf"
    conf.write_text(
        '<?xml version="1.0"?><fontconfig></fontconfig>', encoding="utf-8"
    )  # no font directory at all
    env = {
        "FONTCONFIG_FILE": str(conf),
        "HOME": str(tmp_path),
        "PATH": "/usr/bin:/bin",
        "XDG_DATA_HOME": str(tmp_path),
    }
    cmd = [sys.executable, "-c", RENDER.format(root=str(ROOT), site=site)]
    present = [d for d in FONT_DIRS if Path(d).is_dir()]
    if present:
        if os.geteuid() != 0 or not shutil.which("unshare"):
            pytest.skip("system fonts are installed and hiding them needs root and unshare")
        hide = "; ".join(f"mount -t tmpfs tmpfs {d}" for d in present)
        cmd = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            f'{hide}; exec "$0" "$@"',
            *cmd,
        ]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=True)
    return out.stdout.split()


def test_japanese_glyphs_are_drawn_with_no_system_font(tmp_path):
    """Two different Japanese words draw two different images only where their glyphs are drawn: with no font
    vl-convert draws the same empty boxes for both (the control), with the site's registered font they differ."""
    tofu = _render_without_system_fonts(tmp_path, site=False)
    assert tofu[0] == tofu[1]  # the control: without a Japanese font the two words look alike
    drawn = _render_without_system_fonts(tmp_path, site=True)
    assert drawn[0] != drawn[1]


def _chart():
    from kvcore.views import charts

    df = pd.DataFrame(
        {
            "context": [1024, 4096, 32768, 131072] * 2,
            "gib": [0.03, 0.125, 1.0, 4.0, 0.02, 0.06, 0.5, 2.0],
            "series": ["fp16"] * 4 + ["mlx-q8"] * 4,
        }
    )
    return charts.series_chart(
        df, "context", "gib", "series", "文脈長（トークン）", "GiB", log_x=True, log_y=True
    )


def test_an_export_carries_its_title_settings_and_source():
    import xml.etree.ElementTree as ET

    from kvsite.charts.chart import Export, svg_text, to_spec

    about = Export(
        "文脈長ごとの KV キャッシュのメモリ",
        ("設定：モデル：qwen3-32b、チップ：M4 Pro", "出典：kvcore の計算"),
    )
    svg = svg_text(to_spec(_chart()), about=about)
    lines = {
        "".join(s.itertext())
        for t in ET.fromstring(svg).iter()
        if t.tag.endswith("text")
        for s in (
            [t]
            if not [c for c in t if c.tag.endswith("tspan")]
            else [c for c in t if c.tag.endswith("tspan")]
        )
    }
    assert {
        about.title,
        *about.lines,
    } <= lines  # each a line of its own (a subtitle line per tspan)


def test_nothing_is_cut_at_the_right_edge_of_a_png():
    """The x axis's last label (131,072) ends inside the image: the last columns of pixels are background only."""
    from PIL import Image

    from kvsite.charts.chart import png_bytes, to_spec

    image = Image.open(io.BytesIO(png_bytes(to_spec(_chart()), scale=1))).convert("RGB")
    width, height = image.size
    edge = [image.getpixel((x, y)) for x in range(width - 6, width) for y in range(height)]
    assert all(min(p) > 235 for p in edge), "something is drawn into the right edge"


def test_csv_numbers_are_readable_and_the_source_comes_first():
    from kvsite.charts.tables import csv_bytes

    text = csv_bytes(
        pd.DataFrame({"tokens": [257], "mib": [8.031250000001], "share": [0.1 + 0.2]}),
        ("タイトル", "出典：記事 A"),
    ).decode("utf-8-sig")
    assert text.splitlines() == [
        "#,タイトル",
        "#,出典：記事 A",
        "tokens,mib,share",
        "257,8.031,0.3",
    ]


NOTES = ("タイトル：Llama-3.2-1B", '設定：文脈長：32,768、モデル："llama"', "出典：記事 A")


def test_csv_opens_in_excel_on_a_japanese_mac():
    """Excel reads a CSV without a byte-order mark in the system's code page (Shift_JIS on a Japanese Mac): the file
    starts with UTF-8's BOM. Excel splits a line at every comma outside quotes: each note is one cell beside its #,
    whole (32,768 and quotes included), and the table's header is one row of its own."""
    import csv

    from kvsite.charts.tables import csv_bytes

    df = pd.DataFrame({"文脈長": [32768, 65536], "系列": ["実測, CPU", "公表値"]})
    data = csv_bytes(df, NOTES)
    assert data.startswith(b"\xef\xbb\xbf")
    with pytest.raises(UnicodeDecodeError):
        data.decode("shift_jis")  # what Excel would read without the mark: not these words
    rows = list(csv.reader(io.StringIO(data.decode("utf-8-sig"))))
    assert rows[: len(NOTES)] == [["#", note] for note in NOTES]
    assert rows[len(NOTES) :] == [["文脈長", "系列"], ["32768", "実測, CPU"], ["65536", "公表値"]]


def test_csv_reads_back_in_code_without_its_notes():
    from kvsite.charts.tables import csv_bytes

    df = pd.DataFrame({"tokens": [256, 257], "series": ["allocated, mlx_lm", "used"]})
    back = pd.read_csv(io.BytesIO(csv_bytes(df, NOTES)), comment="#")
    assert back.to_dict("list") == df.to_dict("list")


def test_every_chart_on_the_pages_has_an_export_title_in_both_languages():
    """show_chart(frame, chart, "<key>", ...) titles its downloads with export.<key>: a new chart needs its title."""
    import re

    from i18n_keys import missing_keys

    keys = {
        m.group(1)
        for page in (ROOT / "pages").glob("*.py")
        for m in re.finditer(
            r'show_chart\(.*?"(\w+)",\s*f?"', page.read_text(encoding="utf-8"), flags=re.S
        )
    }
    assert len(keys) >= 10
    assert not (gaps := missing_keys(f"export.{key}" for key in keys)), gaps
