"""Every chart a page opens on, drawn by Vega itself (vl-convert's scenegraph, the marks' pixel positions): no point
and no line lies on or beyond the plot's frame (the scale leaves room past the data), and no two series of one chart
share a colour."""

from __future__ import annotations

import io
import json

import pyarrow.ipc
import pytest
import vl_convert as vlc
from app_helpers import PAGES, page

WIDTH = 600  # px: the plot's width when drawn outside a page (a page's column sets it there)


def drawn_specs(at) -> list[dict]:
    """Each chart's Vega-Lite spec with its datasets back in it, as the browser receives it."""
    out = []
    for el in at.get("vega_lite_chart"):
        spec = json.loads(el.proto.spec)
        spec["datasets"] = {
            d.name: pyarrow.ipc.open_stream(io.BytesIO(d.data.data)).read_all().to_pylist()
            for d in el.proto.datasets
        }
        if spec.get("width") in (None, "container"):
            spec["width"] = WIDTH
        out.append(spec)
    return out


def plots(node: dict, found: list) -> list:
    """(plot, its marks) for every group that holds marks: the plot's width and height frame them."""
    for item in node.get("items", []):
        if node.get("marktype") != "group":
            continue
        marks = [k for k in item.get("items", []) if k.get("role") == "mark"]
        if marks and "width" in item and "height" in item:
            found.append((item, marks))
        for child in item.get("items", []):
            plots(child, found)
    return found


def on_the_edge(spec: dict) -> list[tuple]:
    """Points (symbols) and line vertices on or past the frame: a line's ends may touch the sides, a point not."""
    out = []
    for plot, marks in plots(vlc.vegalite_to_scenegraph(spec)["scenegraph"], []):
        w, h = plot["width"], plot["height"]
        for mark in marks:
            kind = mark.get("marktype")
            for item in mark.get("items", []) if kind in ("symbol", "line") else []:
                x, y = item.get("x"), item.get("y")
                if y is not None and (y <= 0 or y >= h or kind == "symbol" and not 0 < x < w):
                    out.append((mark.get("name"), kind, round(x, 1), round(y, 1), w, h))
    return out


def shared_colours(node) -> list[tuple]:
    """Series of one colour scale given the same colour (its domain against its range)."""
    out = []
    if isinstance(node, dict):
        scale = (
            (node.get("color") or {}).get("scale") if isinstance(node.get("color"), dict) else None
        )
        if isinstance(scale, dict) and isinstance(scale.get("range"), list) and scale.get("domain"):
            colours = scale["range"][: len(scale["domain"])]
            out += [(scale["domain"], colours)] if len(set(colours)) < len(colours) else []
        for value in node.values():
            out += shared_colours(value)
    elif isinstance(node, list):
        for value in node:
            out += shared_colours(value)
    return out


@pytest.mark.parametrize("path", PAGES)
def test_every_default_chart_keeps_its_marks_inside_the_frame_in_colours_apart(rec_dir, path):
    at = page(path, "en")
    assert not at.exception
    specs = drawn_specs(at)
    assert specs, f"no chart on {path}"
    edges = {i: e for i, spec in enumerate(specs) if (e := on_the_edge(spec))}
    assert not edges, edges
    colours = {i: c for i, spec in enumerate(specs) if (c := shared_colours(spec))}
    assert not colours, colours
