"""Does the runtime's whole memory plan fit the memory its GPU may use?

The limit on a Mac is Metal's recommended working set, not all RAM: macOS lets the GPU wire a share of unified
memory that depends on the RAM size and the macOS version (kvcore/timing/working_set.yaml: the lines real Macs printed),
and `sudo sysctl iogpu.wired_limit_mb=N` raises it. Elsewhere the limit is the GPU's own memory.

The verdict compares the plan's total (kvcore.runtimes.llamacpp_plan: model, output, KV and compute buffers) with
that limit. No flat margin: the only allowance is the compute buffer's measured tolerance, so a plan fits when
its total plus that tolerance is within the limit, does not fit when its total minus it is above, and is tight in
between. The part that does not fit is the first, in the order llama.cpp allocates them, whose running sum passes
the limit; the levers are the settings that make the plan fit (flash attention, `-ub` or mlx_lm's
`--prefill-step-size`, the context, the sequences, the KV type), each with the plan it gives.

Example: Llama-3.1-8B (Q4_K_M) at `-c 131072` on a 16 GB Mac -> "no": the plan needs 20.84 GiB of the 10.67
GiB the GPU may use, and the CPU KV buffer is the part that does not fit; levers: `-c 47,104` (with 2 unified
sequences), or a q4_0/q4_1/iq4_nl/q5_0 cache (`calc --model llama-3.1-8b --weights-format gguf-q4_k_m --runtime
llama.cpp --context 131072 --sequences 2 --kv-unified --ram 16`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvcore.errors import KvError, quote
from kvcore.limits import MAX_RAM_GB, MIN_RAM_GB
from kvcore.timing.hardware import gpu_memory_limit_gb
from kvcore.timing.working_set import DEFAULT_MACOS
from kvcore.units import GIB, MIB

UBATCHES = (4096, 2048, 1024, 512, 256, 128, 64)  # -ub values a lever tries, largest first
PREFILL_STEPS = (
    1024,
    512,
    256,
    128,
    64,
)  # mlx_lm --prefill-step-size values a lever tries, largest first
# a runtime's setting that sizes one prefill step (by its options field): the values a lever tries and how the
# runtime's own command line writes it
CHUNK_LEVERS = {
    "ubatch": (UBATCHES, "-ub {}"),
    "prefill_step": (PREFILL_STEPS, "--prefill-step-size {}"),
}


@dataclass(frozen=True)
class Limit:
    """The memory the GPU may use, and why."""

    bytes: int
    source: str

    def as_dict(self) -> dict:
        return {"bytes": self.bytes, "source": self.source}


def gpu_limit(
    ram_gb: float,
    unified: bool = True,
    wired_limit_mb: int | None = None,
    macos: str = DEFAULT_MACOS,
) -> Limit:
    """The GPU's memory limit for a machine of `ram_gb` GB (vendors' GB are GiB): on a Mac, the default working
    set for that RAM size on `macos` (kvcore.timing.working_set: "15" or earlier, "26"), or the wired limit the
    reader set with sysctl iogpu.wired_limit_mb."""
    if (
        isinstance(ram_gb, bool)
        or not isinstance(ram_gb, int | float)
        or not MIN_RAM_GB <= ram_gb <= MAX_RAM_GB  # NaN too
    ):
        raise KvError(
            f"The RAM must be a number of GB from {MIN_RAM_GB:,} to {MAX_RAM_GB:,}, not {quote(ram_gb)}."
        )
    if wired_limit_mb is not None and (
        isinstance(wired_limit_mb, bool)
        or not isinstance(wired_limit_mb, int | float)
        or wired_limit_mb <= 0
    ):
        raise KvError(
            f"The iogpu.wired_limit_mb must be a positive number, not {quote(wired_limit_mb)}."
        )
    if wired_limit_mb is not None:
        if not unified:
            raise KvError(
                "iogpu.wired_limit_mb is a Mac's setting; a dedicated GPU has its own memory."
            )
        if wired_limit_mb * MIB > ram_gb * GIB:
            raise KvError(
                f"iogpu.wired_limit_mb = {wired_limit_mb:,} is more than the {ram_gb:g} GB of RAM."
            )
        return Limit(
            int(wired_limit_mb * MIB),
            f"iogpu.wired_limit_mb = {wired_limit_mb:,} (set with sudo sysctl; the default is a share of RAM)",
        )
    gb, source = gpu_memory_limit_gb(float(ram_gb), unified, macos)
    return Limit(int(gb * GIB), f"{source}; raise it with sudo sysctl iogpu.wired_limit_mb=N")


@dataclass(frozen=True)
class Fit:
    """The verdict: what the need is, against which limit, the part that passes it and the levers.

    With a plan: "fits" | "tight" | "no", its tolerance either way. Without one (weights + KV only):
    "unplanned" | "no", never "fits", with what is not counted and why there is no plan ("runtime" | "model");
    its levers are upper bounds (`at_most`)."""

    status: str
    need_bytes: int  # the plan's total, else weights + KV
    allowance_bytes: int | None  # the plan's measured tolerance, either way; None without a plan
    limit: Limit
    blocking: str | None  # the part whose running sum first passes the limit (None when it fits)
    levers: tuple[dict, ...] = ()
    not_counted: tuple[str, ...] = ()  # without a plan: what the need leaves out
    unplanned: str | None = None  # why there is no plan: "runtime" | "model"

    @property
    def over_bytes(self) -> int:
        """How far the need (with its allowance) is above the limit (0 when within)."""
        return max(0, self.need_bytes + (self.allowance_bytes or 0) - self.limit.bytes)

    @property
    def share(self) -> float:
        """need / limit."""
        return self.need_bytes / self.limit.bytes

    def lever(self, name: str) -> dict | None:
        """The lever of that name ("context", "sequences", "kv_format", "ubatch", ...), or None."""
        return next((x for x in self.levers if x["lever"] == name), None)

    def as_dict(self, limit: Limit | None = None) -> dict:
        """calc --json's fit block (its limit as `limit` says why, if given)."""
        out = {
            "status": self.status,
            "need_bytes": self.need_bytes,
            "allowance_bytes": self.allowance_bytes,
            "limit": (limit or self.limit).as_dict(),
            "over_bytes": self.over_bytes,
            "blocking": self.blocking,
        }
        levers = {"levers": list(self.levers)}
        counted = {
            "counted": "the whole plan" if not self.not_counted else "weights + KV",
            "not_counted": list(self.not_counted),
        }
        if self.unplanned is None:
            return {**out, **levers, **counted}
        return {**out, **counted, "unplanned": self.unplanned, **levers}


def plan_status(need: int, allowance: int, limit_bytes: int) -> str:
    """A plan's total against the limit, its working memory's tolerance either way: "fits" when need + allowance is
    within it, "no" when need - allowance is above, "tight" between (the Calculator's verdict uses this too)."""
    if need + allowance <= limit_bytes:
        return "fits"
    return "no" if need - allowance > limit_bytes else "tight"


def plan_allowance(plan: dict) -> int:
    """How far a plan's total may be off either way: its measured tolerance of the working memory (llama.cpp's compute
    buffer, mlx_lm's transient parts), not of a part that is itself an upper estimate (mlx_lm's in-flight command
    buffers on Metal, kvcore.runtimes.mlx_metal)."""
    return int((plan["compute_bytes"] - plan["in_flight_bytes"]) * plan["compute_tolerance_share"])


def fit(plan: dict, limit: Limit) -> Fit:
    """The verdict for a plan (a runtime plan's as_dict()) against the GPU's limit (no levers: see levers())."""
    need = plan["total_bytes"]
    allowance = plan_allowance(plan)
    status = plan_status(need, allowance, limit.bytes)
    blocking, running, allowed = None, 0, False
    if status != "fits":
        for part in plan["parts"]:
            running += part["bytes"]
            if part["kind"] not in ("weights", "kv", "output") and not allowed:
                running, allowed = (
                    running + allowance,
                    True,
                )  # the tolerance, at the first transient part
            if running > limit.bytes:
                blocking = part["name"]
                break
    return Fit(status, need, allowance, limit, blocking)


def _fits(runtime, geometry, context, spec, sequences, options, weights, flash_attn, limit) -> bool:
    try:
        plan = runtime.memory_plan(geometry, context, spec, sequences, options, weights, flash_attn)
    except KvError:  # a setting the runtime refuses (a quantized V cache without flash attention)
        return False
    return fit(plan, limit).status == "fits"


def smaller_chunk(
    runtime, geometry, context, spec, sequences, options, weights, flash_attn, limit
) -> dict | None:
    """The largest prefill step below the runtime's (llama.cpp's -ub, mlx_lm's --prefill-step-size; CHUNK_LEVERS)
    whose plan fits, as a lever with the plan's total and the runtime's words for it; None when the runtime has no
    such setting or no step of the list fits. A smaller step holds smaller activations and, where attention is not
    fused, far smaller scores (heads x step x keys)."""
    base = runtime.options(sequences, options)
    for s in runtime.settings:
        values, said = CHUNK_LEVERS.get(s.field, ((), ""))
        for value in values:
            if value >= getattr(base, s.field):
                continue
            try:
                plan = runtime.memory_plan(
                    geometry,
                    context,
                    spec,
                    sequences,
                    replace(base, **{s.field: value}),
                    weights,
                    flash_attn,
                )
            except KvError:
                continue
            if fit(plan, limit).status == "fits":
                return {
                    "lever": s.field,
                    "value": value,
                    "said": said.format(value),
                    "need_bytes": plan["total_bytes"],
                }
    return None


def largest_context(
    runtime, geometry, spec, sequences, options, weights, flash_attn, limit, max_context
) -> int:
    """The longest -c whose plan fits (0: not even one token; max_context: any). Every part of the plan grows or
    stays as -c grows (the cells, the micro-batch up to -ub, the scores), so the first that does not fit bounds it."""

    def ok(c):
        return _fits(runtime, geometry, c, spec, sequences, options, weights, flash_attn, limit)

    if not ok(1):
        return 0
    if ok(max_context):
        return max_context
    lo, hi = 1, max_context
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def most_sequences(
    runtime, geometry, spec, context, options, weights, flash_attn, limit, max_context
) -> int:
    """The most sequences that each get `context` tokens (llama.cpp: -c context x N -np N) whose plan fits.
    Every part of a plan grows or stays as sequences are added (each brings its cells and its share of every
    buffer; padding makes the need step, never fall), so the counts that fit are 1..N: N is found by doubling
    then halving (tests/test_capacity.py holds it to trying every count)."""
    most = min(runtime.max_sequences, max_context // context)

    def ok(n: int) -> bool:
        cells = runtime.plan_context(context, n)
        return _fits(runtime, geometry, cells, spec, n, options, weights, flash_attn, limit)

    if most < 1 or not ok(1):
        return 0
    lo, hi = 1, 2  # ok(lo); hi: the first count not yet known to fit
    while hi <= most and ok(hi):
        lo, hi = hi, 2 * hi
    hi = min(hi, most + 1)  # ok(lo), and hi does not fit or is past the most there can be
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def kv_types_that_fit(
    runtime, geometry, context, spec, sequences, options, weights, flash_attn, limit
) -> list[str]:
    """The runtime's KV types (K = V) whose plan fits, from the largest plan to the smallest."""
    from kvcore.memory.formats import KvSpec

    fits = []
    for name in runtime.kv_formats:
        trial = KvSpec(name, name, spec.group_size, spec.activation_dtype)
        try:
            plan = runtime.memory_plan(
                geometry, context, trial, sequences, options, weights, flash_attn
            )
        except KvError:
            continue
        if fit(plan, limit).status == "fits":
            fits.append((plan["total_bytes"], name))
    return [name for _, name in sorted(fits, reverse=True)]


def levers(
    runtime,
    geometry,
    context: int,
    spec,
    sequences: int,
    options,
    weights: int,
    flash_attn: str,
    limit: Limit,
    max_context: int,
) -> list[dict]:
    """The settings that make the plan fit, one change at a time, each solved with the plan (never a margin):
    flash attention on; the largest -ub (mlx_lm: --prefill-step-size), with the plan's total; the longest context
    (-c); the most sequences (-np, each with `context` tokens); the KV types (K = V) that fit."""
    out = []
    if (
        weights > limit.bytes
    ):  # no setting of the context helps: a smaller weight format or more memory
        return out
    args = (geometry, context, spec, sequences)
    if flash_attn == "off" and _fits(runtime, *args, options, weights, "on", limit):
        out.append({"lever": "flash_attn", "value": "on"})
    chunk = smaller_chunk(runtime, *args, options, weights, flash_attn, limit)
    if chunk:
        out.append(chunk)
    common = (options, weights, flash_attn, limit, max_context)
    longest = largest_context(runtime, geometry, spec, sequences, *common)
    if 0 < longest < context:
        out.append({"lever": "context", "value": longest})
    most = most_sequences(runtime, geometry, spec, context, *common)
    if 0 < most < sequences:
        out.append({"lever": "sequences", "value": most})
    formats = [
        name
        for name in kv_types_that_fit(runtime, *args, options, weights, flash_attn, limit)
        if (name, name) != (spec.k_format, spec.v_format)
    ]
    if formats:
        out.append({"lever": "kv_format", "value": formats})
    return out
