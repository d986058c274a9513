"""The decode page's slowdown-vs-bytes chart on a 390 px phone screen in Chromium: the legend sits under
the plot, inside the screen, one entry per run, and a click on an entry selects that run."""

from __future__ import annotations

from kvcore.fits import decode as decode_runs
from kvcore.recordings import store as recordings


def test_the_legend_sits_below_the_plot_on_a_phone(server, browser, ready):
    recs, _ = recordings.load_all()
    runs = list(dict.fromkeys(decode_runs.slowdown_vs_bytes(recs)["run"]))
    ctx = browser.new_context(viewport={"width": 390, "height": 844})
    page = ctx.new_page()
    page.goto(f"{server}/Decode_slowdown?lang=ja")
    ready(page)
    chart = page.locator("[data-testid='stVegaLiteChart']").last
    chart.scroll_into_view_if_needed()
    chart.locator("svg g.role-legend").first.wait_for()
    legend = chart.locator("svg g.role-legend").first.bounding_box()
    x_axis = chart.locator("svg g.role-axis").first.bounding_box()  # the first axis Vega draws is x
    assert legend["y"] >= x_axis["y"] + x_axis["height"] - 1, (
        legend,
        x_axis,
    )  # below the plot, not beside it
    box = chart.bounding_box()
    assert (
        legend["x"] >= box["x"]
        and legend["x"] + legend["width"] <= min(390, box["x"] + box["width"]) + 1
    ), (legend, box)
    y_axis = chart.locator("svg g.role-axis").nth(1).bounding_box()
    assert y_axis["height"] >= 300, y_axis  # the long legend does not squeeze the plot
    labels = [t.text_content() for t in chart.locator("g.role-legend-label text").all()]
    # the runs in colour (at most eight, the picker's) and one grey entry for the rest
    assert len(labels) == min(len(runs), 8) + 1 and labels[-1] == "その他の実行（上で選べます）"
    chart.locator("g.role-legend-label text").first.click()
    ready(page)
    assert "?" in page.url  # the page reran on the selection without an error
    assert page.locator("[data-testid='stException']").count() == 0
    ctx.close()
