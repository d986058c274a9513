"""What mlx's Metal backend does that its CPU backend does not, as mlx_lm's memory plan (kvcore.runtimes.mlx_lm_plan)
counts it: the fused attention kernel, and the arrays kept for command buffers in flight. Both are read from mlx's
source (v0.32.1); this project has no Mac, so neither is measured here: the published Mac peaks
(kvcore.views.published_memory) are what they are held to.

Fused attention: Metal's sdpa_full kernel runs a prefill chunk without materialising the scores or the mask when the
head dimension is 64, 72, 80, 96 or 128 (K and V alike) and the cache is not quantized.

In-flight command buffers: mlx keeps an op's input arrays until the GPU has finished the command buffer the op was
encoded in (backend/metal/eval.cpp: the inputs go into the buffer's completion handler), and encodes ahead of the GPU:
a command buffer is committed after 50 ops or 50 MiB of buffers when the GPU's architecture name ends in 's' or
'd', 40 and 40 when it ends in 'g', 20 ops and 40 MiB in 'p' (a phone) -- the name's last letter decides, not the
chip's marketing name (backend/metal/device.cpp#L602-L623 at v0.32.1) -- and the CPU waits only once more than MAX_ACTIVE_TASKS = 10 committed buffers are running
(transforms.cpp). Up to 12 buffers' arrays (11 committed, one being encoded) can outlive their last use: the plan
counts an upper estimate of 12 x the commit size, never more than the step's own arrays (one layer's arrays x the
layers). It is not fitted: without it every published Mac peak was 0.27-0.64 GB above the plan; with it each lies
between the plan without and with it (docs/methods.md).

Example: command_buffer_mib("M3", "applegpu_g15g") -> (40, ...); command_buffer_mib("M4 Pro") -> (50, ...): a Pro
chip's architecture name is not in its name, so the larger; in_flight_cap(None) -> 629_145_600.
"""

from __future__ import annotations

import re

from kvcore.errors import KvError, quote
from kvcore.runtimes.base import Part
from kvcore.units import MIB

MLX_SOURCE = "https://github.com/ml-explore/mlx/blob/v0.32.1/mlx"
FUSED_HEAD_DIMS = (
    64,
    72,
    80,
    96,
    128,
)  # scaled_dot_product_attention.cpp: the sdpa_full kernel's head sizes
MAX_ACTIVE_TASKS = (
    10  # transforms.cpp#L25, #L271: the CPU waits once more than this many buffers run
)
# device.cpp#L602-L623 (v0.32.1): `switch (arch_.back())` on the GPU's architecture name (e.g. "applegpu_g15s"):
# committed past this many MiB; any other last letter takes the default, 40
COMMAND_BUFFER_MIB = {"p": 40, "g": 40, "s": 50, "d": 50}
ARCH_SOURCE = f"{MLX_SOURCE}/backend/metal/device.cpp#L602-L623"
# an Apple M-series chip as Metal and the published runs name it: "Apple M3 Max", "M4 Max (40-core GPU)", "M5"
APPLE_CHIP = re.compile(r"(?:Apple\s+)?M\d+(?:\s+(?P<cls>Pro|Max|Ultra))?(?:\s*\(.*\))?")
IN_FLIGHT = MAX_ACTIVE_TASKS + 2  # 11 committed buffers and the one being encoded
EVAL_SOURCE = f"{MLX_SOURCE}/backend/metal/eval.cpp#L47-L68"


def fused(layer, quantized: bool, tokens: int) -> bool:
    """Metal's fused attention runs this layer's chunk of `tokens` without materialising the scores."""
    return (
        not quantized
        and tokens > 8
        and layer.k_dim == layer.v_dim
        and layer.k_dim in FUSED_HEAD_DIMS
    )


def command_buffer_mib(chip: str | None, architecture: str | None = None) -> tuple[int, str]:
    """(MiB after which mlx commits a Metal command buffer, why): decided by the last letter of the GPU's
    architecture name (mx.device_info()["architecture"] on a Mac; device.cpp). Without it, from the chip's name:
    40 for a base chip, 50 for a Max or Ultra, and 50 for a Pro (its architecture letter is not in its name, so
    the larger); without a chip the larger too, so the estimate stays an upper one."""
    if architecture:
        mib = COMMAND_BUFFER_MIB.get(architecture.strip()[-1:], 40)
        return mib, f"the GPU architecture {architecture!r} (its last letter, device.cpp)"
    if chip is None:
        return 50, "no chip given: the larger size"
    name = APPLE_CHIP.fullmatch(chip.strip()) if isinstance(chip, str) else None
    if name is None:
        raise KvError(
            f"mlx's Metal plan is for Apple M-series chips (e.g. 'M4 Max', 'Apple M3 Pro'), not {quote(chip)}."
        )
    if name["cls"] is None:
        return 40, f"a base chip ({chip})"
    return (
        50,
        f"an {name['cls']} chip ({chip}; the larger size where its architecture name is not known)",
    )


def in_flight_cap(chip: str | None) -> int:
    """The most the in-flight command buffers can keep, in bytes: IN_FLIGHT buffers of the chip's commit size."""
    return IN_FLIGHT * command_buffer_mib(chip)[0] * MIB


def in_flight_part(made: int, tokens: int, chip: str | None) -> Part:
    """What a step of `tokens` tokens may keep for command buffers in flight: the cap, never more than the `made`
    bytes of arrays the step makes."""
    mib, chip_class = command_buffer_mib(chip)
    return Part(
        "in-flight command buffers (estimate)",
        "inflight",
        min(in_flight_cap(chip), made),
        f"up to {IN_FLIGHT} command buffers x {mib} MiB on {chip_class}, at most the step's own arrays "
        f"({tokens:,} tokens, every layer): an estimate from mlx's source, not a bound (one op can exceed "
        f"the commit size; old cache buffers at growth steps are held too)",
        EVAL_SOURCE,
    )
