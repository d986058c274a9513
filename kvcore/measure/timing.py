"""How the live sweeps time their points: their options (SweepOptions), the timed steps of one visit
(after untimed warm-up steps), and the passes over the points, each pass in a fresh shuffled order,
that give every point one figure per pass (the median over passes, with its quartiles and spread).

Example: timed_passes([256, 1024], SweepOptions(repeats=2), ticker, measure, rows, label)
-> {256: [pass 1, pass 2], 1024: [pass 1, pass 2]}, measure(point) called in pass_orders' order.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Hashable

from kvcore.measure.progress import Ticker

SUITE = (
    "trap",
    "growth",
    "decode",
    "mechanism",
)  # what `kvcore record` measures unless told otherwise
SWEEPS = SUITE + ("prefill", "batch")  # every section `record --sections` can measure

SWEEP_ORDER = (
    "contexts visited in a fresh shuffled order each pass (seeded), a fresh cache every visit"
)
SWEEP_SPREAD = (
    "min_ms/max_ms and q1_ms/q3_ms (interquartile range) of the per-pass medians listed in pass_ms"
)


@dataclass(frozen=True)
class SweepOptions:
    """A sweep's timing settings: what `--warmup`, `--steps` and `--repeats` set."""

    warmup: int = 3  # untimed steps per visit first (first use: kernels and buffers)
    steps: int = 16  # timed steps per visit; the visit's figure is their median
    repeats: int = 3  # passes over the points, each in its own shuffled order
    seed: int = 0  # the shuffles' seed, so a run can be repeated


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(first quartile, median, third quartile) of `values`, the 'inclusive' method (numpy's default
    linear interpolation between order statistics), so a single value gives (v, v, v).

    Example: quartiles([1, 2, 3, 4, 5]) -> (2.0, 3.0, 4.0).
    """
    if len(values) == 1:
        return (values[0],) * 3
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def pass_spread(ms_list: list[float]) -> tuple[float, dict]:
    """(median, the spread fields a timed point records) of one point's pass medians: min, max, their
    difference, the quartiles, the passes themselves and their count.

    Example: pass_spread([2.0, 1.0, 3.0])[0] -> 2.0.
    """
    q1, ms, q3 = quartiles(ms_list)
    low, high = min(ms_list), max(ms_list)
    return ms, {
        "min_ms": low,
        "max_ms": high,
        "spread_ms": high - low,
        "q1_ms": q1,
        "q3_ms": q3,
        "pass_ms": list(ms_list),
        "repeats": len(ms_list),
    }


def pass_orders(contexts: list, passes: int, seed: int = 0) -> list[list]:
    """The order in which each pass visits `contexts`: a fresh random shuffle per pass (seeded, so a
    run can be repeated), so that drift of a shared machine over the run lands on every context
    alike instead of bending the curve the way a fixed short-to-long order would.

    Example: pass_orders([256, 1024, 4096], 2) -> two permutations of the three contexts.
    """
    import random

    rng = random.Random(seed)
    orders = []
    for _ in range(passes):
        order = list(contexts)
        rng.shuffle(order)
        orders.append(order)
    return orders


def timed_steps(
    step: Callable[[], None], warmup: int, steps: int, ticker: Ticker | None = None
) -> list[float]:
    """ms of each of `steps` timed calls of `step` (one evaluated decode step) after `warmup`
    untimed ones; the stop button is checked after every call."""
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        step()
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1000)
        if ticker:
            ticker.check()
    return times


def timed_passes(
    points: list[Hashable],
    options: SweepOptions,
    ticker: Ticker,
    measure: Callable[[Hashable], float],
    rows: Callable[[dict], list[dict]],
    label: Callable[[Hashable], str],
    on_rows: Callable[[list[dict]], None] | None = None,
) -> dict:
    """{point: its figure in each pass}: `options.repeats` passes over `points`, each in its own
    shuffled order (pass_orders), measure(point) once per visit; after every visit on_rows gets
    rows(the figures so far) and the progress bar ticks with label(point) and the pass."""
    values: dict = {p: [] for p in points}
    for r, order in enumerate(pass_orders(points, options.repeats, options.seed)):
        for point in order:
            values[point].append(measure(point))
            if on_rows:
                on_rows(rows(values))
            ticker.tick(f"{label(point)} (pass {r + 1}/{options.repeats})")
    return values
