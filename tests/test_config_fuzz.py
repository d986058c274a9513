"""Any config.json, however broken, gives a geometry or one KvError — never another exception."""

import json
import math
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvcore.capacity.calculator import calculate
from kvcore.errors import KvError
from kvcore.inputs.config import parse_config, parse_json_text
from kvcore.inputs.preset_files import load_preset, preset_names
from kvcore.runtimes.mlx_lm import MLX_LM
from kvsite import i18n

JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=10,
)


def _said_in_japanese(e: KvError) -> None:
    """A reader can paste any config.json: every refusal has a code, and its Japanese sentence formats."""
    assert e.code is not None, str(e)
    text = i18n.error_text("ja", e)
    assert JAPANESE.search(text) and "⟨" not in text, text


def _check(config):
    try:
        g = parse_config(config, "config.json", MLX_LM)
    except KvError as e:
        _said_in_japanese(e)
        return
    calculate(g, 1000, 1)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(preset_names()), data=st.data())
def test_a_preset_with_broken_fields_never_raises_anything_but_kverror(name, data):
    config = json.loads(json.dumps(load_preset(name)["config"]))
    target = (
        config["text_config"] if "text_config" in config and data.draw(st.booleans()) else config
    )
    for key in data.draw(st.lists(st.sampled_from(sorted(target)), min_size=1, max_size=3)):
        target[key] = data.draw(JSON_VALUES)
    _check(config)


@pytest.mark.parametrize(
    "value", [math.nan, math.inf, -math.inf, 1e300, 10**40, -1, 0, "32", [32], {"a": 1}, True]
)
def test_absurd_layer_counts_are_named(value):
    config = dict(load_preset("llama-3.2-1b")["config"], num_hidden_layers=value)
    with pytest.raises(KvError, match="num_hidden_layers"):
        parse_config(config, "config.json", MLX_LM)


def test_a_million_layers_is_refused_quickly():
    with pytest.raises(KvError, match="1 to 1,024"):
        parse_config(
            dict(load_preset("llama-3.2-1b")["config"], num_hidden_layers=1_000_000),
            "config.json",
            MLX_LM,
        )


@pytest.mark.parametrize(
    "text", ["[" * 100_000, '{"a":' * 50_000, "NaN", '{"num_hidden_layers": Infinity}']
)
def test_pathological_json_text_is_a_kverror(text):
    with pytest.raises(
        KvError
    ) as refused:  # none of these is a config.json: each is refused, with its sentence
        parse_config(parse_json_text(text), "config.json", MLX_LM)
    _said_in_japanese(refused.value)
