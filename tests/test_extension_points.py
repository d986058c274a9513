"""Where a new cache format or model family goes: one entry, and it reaches the engine, the calculator and the CLI
(the README's contributor's guide; a chapter's registry is held by tests/app/test_chapters.py)."""

from __future__ import annotations

import json

import pytest

from kvcore import cli, families, formats, geometry
from kvcore.errors import KvError
from kvcore.calculator import calculate, formats_that_fit
from kvcore.formats import CacheFormat
from kvcore.formulas import KvSpec, kv_bytes


@pytest.fixture
def throwaway_format(monkeypatch):
    """A 6-bit block format (32 values in 26 bytes), registered in the one table of formats."""
    fmt = CacheFormat("q6_test", "ggml", 6, 32, 26, source="a throw-away format for this test")
    monkeypatch.setitem(formats.FORMATS, fmt.name, fmt)
    return fmt


def test_a_format_added_to_the_table_reaches_the_formula_the_calculator_and_the_cli(throwaway_format, capsys):
    g = geometry.preset_geometry("llama-3.2-1b")
    spec = KvSpec("q6_test", "q6_test")
    assert kv_bytes(g, 1024, spec) == 1024 * 16 * 8 * 2 * (64 // 32) * 26  # tokens x layers x heads x K+V x blocks x bytes
    assert calculate(g, 1024, 1, spec, "mlx-q4")["kv_bytes"] == kv_bytes(g, 1024, spec)
    assert "q6_test" in formats_that_fit(g, 131072, 1, 0, 10**12, KvSpec())  # offered as a lever
    assert cli.main(["calc", "--model", "llama-3.2-1b", "--context", "1024", "--kv-format", "q6_test", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kv_bytes"] == kv_bytes(g, 1024, spec)


def test_a_family_added_to_the_table_is_parsed_by_its_row_and_an_unknown_one_is_refused(monkeypatch):
    config = dict(geometry.load_preset("llama-3.2-1b")["config"], model_type="throwaway_llama")
    with pytest.raises(KvError, match="throwaway_llama"):
        geometry.parse_config(config)
    monkeypatch.setitem(families.FAMILIES, "throwaway_llama", families.Family("throwaway_llama", defaults={"head_dim": 32}))
    g = geometry.parse_config({k: v for k, v in config.items() if k != "head_dim"})
    assert g.model_type == "throwaway_llama" and {layer.k_dim for layer in g.layers} == {32}  # the row's default applies
