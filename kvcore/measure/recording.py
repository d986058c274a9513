"""A run becomes a recording through one builder (build_recording), for the command line and the site's live mode
alike: its rows kept to the fields the schema knows, its provenance, its model and its method, validated; saved
atomically by kvcore.recordings.store.

Example: build_recording({"trap": rows}, model_info(model), {"trap": trap_method(...)}, "kvcore probe")
    -> {"schema": 1, "kind": "measured", "label": "Measured — Linux CPU demonstration ...", ...}
"""

from __future__ import annotations

from pathlib import Path

from kvcore.measure.caches import GROUP_SIZE, ROTATING_MAX
from kvcore.measure.live_model import LiveModel
from kvcore.measure.machine import measured_provenance
from kvcore.measure.timing import SWEEP_ORDER, SWEEP_SPREAD
from kvcore.memory.formulas import PREFILL_STEP
from kvcore.model.geometry import Geometry
from kvcore.recordings import store as recordings
from kvcore.recordings.provenance import is_apple_silicon

ROW_FIELDS = {name: recordings.known_fields(name) for name in recordings.SECTIONS}
CPU_LABEL = "Measured — Linux CPU demonstration (mlx[cpu]), not Apple Silicon"


def section_rows(section: str, rows: list[dict]) -> list[dict]:
    """Keep the fields the recording schema knows for `section` (probe rows carry more, e.g. exact bytes)."""
    keep = ROW_FIELDS[section]

    def tidy(v):
        return (
            round(v, 6)
            if isinstance(v, float)
            else [tidy(x) for x in v]
            if isinstance(v, list)
            else v
        )

    return [{k: tidy(v) for k, v in row.items() if k in keep and v is not None} for row in rows]


def default_label(prov: dict) -> str:
    """How the UI names a run: Apple Silicon only when provenance.is_apple_silicon says so, never a CPU run."""
    if is_apple_silicon(prov):
        return f"Measured — {prov['machine']['chip']} ({'Metal' if prov['backend'] == 'mlx metal' else prov['backend']}), live run"
    system = prov["machine"]["os"].split()[0]
    return (
        CPU_LABEL
        if system == "Linux"
        else f"Measured — {system} CPU demonstration ({prov['backend']}), not Apple Silicon"
    )


def build_recording(
    sections: dict[str, list[dict]],
    model: dict,
    method: dict,
    command: str,
    title: str | None = None,
    label: str | None = None,
) -> dict:
    """A schema-1 measured recording from probe rows; validated before it is returned. The one path from a run to a
    recording: the command line (`kvcore record`, `--save`) and the site's live mode both call it."""
    prov = measured_provenance(command)
    data = {
        "schema": recordings.SCHEMA_VERSION,
        "kind": "measured",
        "title": title or f"Live run: {', '.join(sections)} — {model['name']} ({prov['backend']})",
        "label": label or default_label(prov),
        "provenance": prov,
        "model": model,
        "method": method,
        "sections": {name: section_rows(name, rows) for name, rows in sections.items() if rows},
    }
    return recordings.validate(data)


def model_info(
    model: LiveModel | None, geometry: Geometry | None = None, kv_format: str | None = None
) -> dict:
    """The recording's `model` mapping: which model, random or loaded, weights and KV formats."""
    info = (
        model.summary()
        if model
        else {"name": geometry.name, "source": "geometry only (no weights needed)"}
    )
    if kv_format:
        info["kv_format"] = kv_format
    if geometry is not None and (model is None or geometry.name != model.name):
        info["trap_and_growth_geometry"] = geometry.name
        info["name"] = (
            f"{info['name']} (decode, mechanism); {geometry.name} geometry (trap, growth)"
            if model
            else geometry.name
        )
    return info


DECODE_FILL = (
    "synthetic: random K/V for T+1 tokens written into each layer's cache, evaluated before timing"
)


def trap_method(tokens: int, kv_dtype: str, bits: int, layers: int) -> dict:
    """How a trap probe was made (method.trap): the one text for `kvcore probe` and `kvcore record`."""
    return {
        "driver": "real mlx_lm cache classes fed random tensors of one layer",
        "tokens": tokens,
        "kv_dtype": kv_dtype,
        "used_bytes": "from keys_and_values() arrays",
        "rotating_max_size": ROTATING_MAX,
        "quantized": f"group {GROUP_SIZE}, {bits} bits",
        "layers": layers,
    }


def growth_method(kv_format: str) -> dict:
    """How a growth sweep was made (method.growth): the one text for `kvcore kv` and `kvcore record`."""
    return {
        "fill": f"random K/V in generate_step's prefill chunks ({PREFILL_STEP})",
        "kv_format": kv_format,
        "active": "mx.get_active_memory() delta",
        "peak": "mx.get_peak_memory() over the next token",
    }


def decode_method(warmup: int, steps: int, repeats: int, kv_format: str) -> dict:
    """How a decode sweep was made (a recording's method.decode): the one text for `kvcore decode`, `kvcore record`
    and the site's live mode."""
    return {
        "fill": DECODE_FILL,
        "warmup": warmup,
        "steps": steps,
        "repeats": repeats,
        "statistic": "median of repeat medians",
        "order": SWEEP_ORDER,
        "spread": SWEEP_SPREAD,
        "sync": "mx.eval of the sampled token every step",
        "kv_format": kv_format,
    }


def quality_method(
    text: str, tokens: int, chunk: int, prompt: str | None, model: LiveModel
) -> dict:
    """How a quality run was made (the recording's method.quality); the prompt, a model input, lives in the answers'
    rows, so it is not repeated here unless no answers were asked for."""
    from kvcore.measure import blas
    from kvcore.measure.mlx_quality import QUANTIZE_RULE

    return {
        "text": Path(text).name,
        "tokens": tokens,
        "chunk": chunk,
        "baseline": f"mlx_lm's KVCache in the activation dtype ({model.dtype})",
        "quantize": QUANTIZE_RULE,
        "metrics": "perplexity of the run; mean KL(baseline || run) in nats; share of positions with the "
        "baseline's top-1 token (kvcore.measure.quality)",
        "weights": model.weights_note,
        "blas": blas.state()["note"],
    }


def blas_libraries() -> dict:
    """Which BLAS mlx's CPU matmuls ran on (Linux, from /proc/self/maps): the libraries loaded, and the one whose
    cblas_sgemm the process's global scope finds first (a library preloaded with LD_PRELOAD or RTLD_GLOBAL, which
    mlx binds to before the reference BLAS its wheel bundles); without one, mlx's own. Empty where unknown."""
    import ctypes

    try:
        maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return {}
    ranges = []
    for line in maps:
        parts = line.split()
        if len(parts) >= 6 and "blas" in parts[-1].rsplit("/", 1)[-1].lower():
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            ranges.append((lo, hi, parts[-1]))
    if not ranges:
        return {}
    loaded = sorted({name for _, _, name in ranges})
    try:
        address = ctypes.cast(ctypes.CDLL(None).cblas_sgemm, ctypes.c_void_p).value
        used = next(name for lo, hi, name in ranges if lo <= address < hi)
    except (AttributeError, OSError, StopIteration):
        used = next(
            (n for n in loaded if "mlx" in n), loaded[0]
        )  # no global definition: mlx's bundled one
    return {"libraries": loaded, "sgemm_from": used}


def load_average() -> float | None:
    """The machine's 1-minute load average (os.getloadavg), None where the system has none."""
    import os

    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def save_run(data: dict, out: str | Path | None = None, name: str | None = None) -> Path:
    """Save a finished run (LOCAL_DIR unless `out`; file stem `name` or date + title); RecordingError in
    read-only mode or on a bad folder. Never overwrites: a taken name gets a -2, -3 ... suffix.
    """
    return recordings.save(data, Path(out) if out else recordings.LOCAL_DIR, stem=name)
