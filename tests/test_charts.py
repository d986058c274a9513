"""kvcore.views.charts options on real data: the decode chart's error bars (spread over passes)."""

import math

import pandas as pd
import pytest

from kvcore.views import charts, run_charts
from kvcore.views import memory as views


def _layers(chart) -> tuple[list[dict], dict]:
    spec = chart.to_dict()
    return spec["layer"], spec.get("datasets", {})


def _rows(layer: dict, datasets: dict) -> list[dict]:
    return datasets[layer["data"]["name"]]


@pytest.mark.mlx
def test_decode_points_get_error_bars_from_their_spread_over_passes():
    from kvcore.measure.decode import decode_sweep
    from kvcore.measure.models import build_random
    from kvcore.measure.timing import SweepOptions

    tiny = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_hidden_layers": 1,
        "intermediate_size": 128,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 32,
        "vocab_size": 128,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": True,
    }
    rows = decode_sweep(
        build_random("tiny", tiny, "fp32", dtype="fp32"), [16, 48], options=SweepOptions(0, 3, 4)
    )
    older = {
        "context": 96,
        "tokens_per_s": 30.0,
        "ms_per_token": 1000 / 30,
    }  # a recording made before the spread
    points = views.decode_spread(pd.DataFrame([*rows, older]).assign(source="live"))
    chart = charts.series_chart(
        None,
        "context",
        "tokens_per_s",
        "source",
        "context",
        "tokens/s",
        points=points,
        log_x=True,
        log_y=True,
        error=("tokens_per_s_low", "tokens_per_s_high"),
    )
    layers, data = _layers(chart)
    (bar,) = [x for x in layers if x["mark"]["type"] == "rule"]
    assert (
        bar["encoding"]["y"]["field"] == "tokens_per_s_low"
        and bar["encoding"]["y2"]["field"] == "tokens_per_s_high"
    )
    drawn = {
        r["context"]: (r["tokens_per_s_low"], r["tokens_per_s_high"]) for r in _rows(bar, data)
    }
    assert set(drawn) == {16, 48}  # the older row has no bar
    for r in rows:
        low, high = drawn[r["context"]]
        assert low == pytest.approx(1000 / r["q3_ms"]) and high == pytest.approx(1000 / r["q1_ms"])
        assert low <= r["tokens_per_s"] <= high
    y_domain = bar["encoding"]["y"]["scale"][
        "domain"
    ]  # the log axis spans the bars, not only the points
    assert y_domain[0] <= min(v[0] for v in drawn.values()) and y_domain[1] >= max(
        v[1] for v in drawn.values()
    )


def test_min_max_spread_and_a_chart_without_error_bars_is_unchanged():
    points = pd.DataFrame(
        [{"context": 256, "tokens_per_s": 25.0, "min_ms": 38.0, "max_ms": 42.0, "source": "a"}]
    )
    ranged = views.decode_spread(points, "range")
    assert ranged.loc[0, "tokens_per_s_low"] == pytest.approx(1000 / 42) and ranged.loc[
        0, "tokens_per_s_high"
    ] == pytest.approx(1000 / 38)
    assert math.isnan(
        views.decode_spread(points).loc[0, "tokens_per_s_low"]
    )  # no q1/q3: no interquartile bar
    plain, _ = _layers(
        charts.series_chart(None, "context", "tokens_per_s", "source", "c", "t", points=points)
    )
    assert [x["mark"]["type"] for x in plain] == ["point"]


@pytest.mark.parametrize(
    "lo, hi", [(119, 292), (3.49, 26.8), (0.03, 1.2), (40, 500), (1, 1e6), (6.2, 17), (100, 100)]
)
def test_a_log_axis_labels_around_every_point_with_round_steps(lo, hi):
    from kvcore.views.chart_parts import MIN_LOG_TICKS, log_ticks

    ticks = log_ticks(lo, hi)
    assert (
        ticks[0] <= lo and ticks[-1] >= hi
    )  # every point inside the labelled range (Article A's 292 tok/s was above)
    assert len(ticks) >= MIN_LOG_TICKS and ticks == sorted(set(ticks))
    assert all(
        b / a <= 2.5 for a, b in zip(ticks, ticks[1:])
    )  # no curve sits a decade from its nearest label
    assert ticks[0] > lo / 10 and ticks[-1] < hi * 10


def test_a_log_charts_domain_runs_from_the_tick_below_to_the_tick_above():
    from kvcore.views.chart_parts import log_ticks
    from kvcore.views.charts import series_chart

    df = pd.DataFrame(
        {"context": [1024, 32768], "tokens_per_s": [292.0, 119.0], "series": ["a", "a"]}
    )
    spec = series_chart(
        df, "context", "tokens_per_s", "series", "Context", "tok/s", log_x=True, log_y=True
    ).to_dict()
    ys = [
        layer["encoding"]["y"]
        for layer in spec.get("layer", [spec])
        if "y" in layer.get("encoding", {})
    ]
    assert (
        ys[0]["scale"]["domain"]
        == [log_ticks(119, 292)[0], log_ticks(119, 292)[-1]]
        == [100.0, 300.0]
    )
    assert ys[0]["axis"]["values"] == [100.0, 125.0, 150.0, 200.0, 250.0, 300.0]


def test_every_chart_keeps_its_y_axis_and_puts_its_legend_under_the_plot():
    from kvcore.views.charts import series_chart

    df = pd.DataFrame(
        {
            "context": [1024, 32768],
            "tokens_per_s": [292.0, 119.0],
            "series": ["a", "a"],
            "low": [280.0, 110.0],
            "high": [300.0, 125.0],
        }
    )
    spec = series_chart(
        df,
        "context",
        "tokens_per_s",
        "series",
        "Context",
        "tok/s",
        points=df,
        log_x=True,
        log_y=True,
        error=("low", "high"),
    ).to_dict()
    ys = [layer["encoding"]["y"] for layer in spec["layer"] if "y" in layer.get("encoding", {})]
    assert ys and all(
        y.get("axis", {}) is not None for y in ys
    )  # one layer with axis=None once hid the whole axis
    legends = [
        layer["encoding"]["color"]["legend"]
        for layer in spec["layer"]
        if "color" in layer.get("encoding", {})
    ]
    assert legends and all(lg["orient"] == "bottom" for lg in legends)


def test_a_choice_inside_a_bar_chart_is_a_bound_parameter_over_rows_the_chart_holds():
    """Linear growth's per-layer chart: the spec holds every context's rows and a radio-bound parameter (a variable,
    not a selection, so Streamlit's on_select does not rerun on it) that filters the bars to one context."""
    from kvsite.sections.growth import growth_layers

    contexts = (1024, 32768, 131072)
    spec = growth_layers("llama-3.2-1b", contexts, 32768, "fp16", 1, "en")["chart"].spec
    (param,) = [p for p in spec["params"] if p["name"] == "choice"]
    assert param["value"] == 32768 and "select" not in param  # a variable parameter
    assert param["bind"] == {
        "input": "radio",
        "options": list(contexts),
        "labels": ["1,024", "32,768", "131,072"],
        "name": "Context (tokens): ",
    }
    bars = next(layer for layer in spec["layer"] if layer["mark"]["type"] == "bar")
    assert bars["transform"] == [{"filter": "(datum['context'] === choice)"}]
    table = growth_layers("llama-3.2-1b", contexts, 32768, "fp16", 1, "en")["chart"].data
    assert sorted(set(table["Context (tokens)"])) == list(contexts)
    per_ctx = table.groupby("Context (tokens)")[
        "MiB"
    ].sum()  # full attention: bytes follow the context
    assert per_ctx[131072] == 4 * per_ctx[32768] == 128 * per_ctx[1024]


def test_the_quality_charts_point_labels_do_not_overlap_on_a_phone():
    """Savings' quality chart at 390 px: the bundled run's seven labels (three formats crowd the top left) each get
    a free place, none covering another; wider charts keep
    every label above its point; too crowded: left to the tooltip."""
    from kvcore.recordings import store as recordings
    from kvcore.views import savings as savings_views
    from kvcore.views.chart_parts import LABEL_PLACES, NARROW_PX, label_places

    recs, _ = recordings.load_all([recordings.BUNDLED_DIR])
    rec = next(r for r in recs if r.id == "measured-linux-cpu-smollm2-135m")
    df = savings_views.quality_trade([rec, *savings_views.quality_companions(rec, recs)])
    df = df[df["kl_vs_baseline"] > 0].assign(
        top1=lambda d: d["top1_agreement"].map("top-1 {:.1%}".format)
    )
    assert len(df) == 7
    places = label_places(list(df["bytes_per_token"]), list(df["kl_vs_baseline"]), list(df["top1"]))
    assert None not in places and set(places) - {"above"}, places  # all placed, not all above
    crowded = label_places([1.0] * 6 + [2.0], [1.0] * 6 + [2.0], ["top-1 50.0%"] * 7)
    assert None in crowded and crowded[-1] == "left", crowded  # the corner: only its left is free
    spec = run_charts.quality_trade(
        df, "bytes_per_token", "kl_vs_baseline", "format", "top1", "B", "KL"
    ).to_dict()
    tests = [
        (
            layer.get("transform", [{}])[0].get("filter"),
            layer["encoding"]["opacity"]["condition"][0]["test"],
        )
        for layer in spec["layer"][1:]
    ]
    assert tests[0] == (None, f"!(width >= {NARROW_PX})") and spec["layer"][1]["mark"]["dy"] == -14
    assert tests[1:] == [
        (f"datum.label_place == '{p}'", f"!(width < {NARROW_PX})") for p, *_ in LABEL_PLACES
    ]


def test_two_series_of_one_chart_never_share_a_colour():
    """More sources than the palette holds share a colour site-wide (source_colors cycles): within one chart the
    later of two gets a colour no series of that chart has, the first keeps its own."""
    from kvcore.views.chart_parts import PALETTE, color_scale

    same = {"run a": PALETTE[7], "run b": PALETTE[7], "run c": PALETTE[0]}
    scale = color_scale(["run a", "run b", "run c", "computed"], same).to_dict()
    assert scale["range"][0] == PALETTE[7] and scale["range"][2] == PALETTE[0]
    assert len(set(scale["range"])) == 4
