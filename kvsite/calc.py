"""The calculator page's widgets and cached engine calls (the arithmetic is kvcore.calculator's)."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from kvcore.geometry import Geometry, load_preset, parse_config, parse_json_text
from kvcore.hardware import chips, get_chip, mac_gpu_share
from kvcore.units import GIB

CUSTOM = "custom"
LOG_STEPS = [1, 16, 256, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288,
             1_048_576, 2_097_152, 4_194_304, 10_000_000, 100_000_000]


@dataclass(frozen=True)
class Memory:
    bytes: int
    reason: str


def chip_names() -> list[str]:
    return [CUSTOM, *(c.chip for c in chips())]


def available_memory(f, chip: str, col_ram, col_limit) -> Memory:
    """Memory the model may use: a custom GiB figure, or the chip's RAM (macOS's GPU share on a Mac, overridable).

    Vendors' "GB" of RAM and GPU memory are binary: a 16 GB Mac has 16 GiB.
    """
    from .frame import url_choice

    if chip == CUSTOM:
        gib = col_ram.number_input(f.t("calc.custom_gib"), 0.5, 1e6, 24.0, step=1.0, key="gib", bind="query-params")
        return Memory(int(gib * GIB), f.t("calc.reason_custom"))
    c = get_chip(chip)
    if c.memory_gb:
        options = list(c.memory_gb)
        ram = url_choice(col_ram.selectbox, f.t("calc.ram"), options, options[len(options) // 2], "ram",
                         format_func=lambda v: f"{v} GB", help=f.t("calc.ram_help"))
    else:
        ram = col_ram.number_input(f.t("calc.ram"), 1, 4096, 48, key="ramn", bind="query-params", help=f.t("calc.ram_help"))
    share, source = mac_gpu_share(float(ram)) if c.unified else (1.0, "")
    override = col_limit.number_input(f.t("calc.override"), 0.0, 1e6, 0.0, step=1.0, key="limit", bind="query-params",
                                      help=f.t("calc.override_help"))
    if override > 0:
        return Memory(int(override * GIB), f.t("calc.reason_override"))
    reason = f.t("calc.reason_mac", share=f"{share:.0%}", source=source) if c.unified else f.t("calc.reason_gpu")
    return Memory(int(ram * share * GIB), reason)


@st.cache_resource(max_entries=32, show_spinner=False)
def config_geometry(text: str | None, name: str, runtime: str) -> Geometry:
    """A preset (text None) or a pasted config.json -> geometry; KvError names the problem field."""
    if text is None:
        return parse_config(load_preset(name)["config"], name, runtime)
    return parse_config(parse_json_text(text, name), name, runtime)
