"""Live measurement, part 1: the models to measure (their caches and the memory guard:
kvcore.measure.caches; the machine and its backend: kvcore.measure.machine).

mlx and mlx_lm are imported inside functions only, so `import kvcore` never loads them.
A model is either built from a config with random weights (same architecture and weight
quantization as the real one, hence the same decode cost, no download) or loaded with mlx_lm's
own loader from a local directory or (on a Mac) a Hugging Face id.
Example: build_model("llama-3.2-1b").summary() -> {"name": "llama-3.2-1b", "weights": "random", ...}
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from kvcore.errors import KvError, did_you_mean
from kvcore.inputs.config import parse_config, read_config_file
from kvcore.inputs.preset_files import load_preset, preset_names
from kvcore.measure import machine
from kvcore.measure.caches import GROUP_SIZE, mx_dtype
from kvcore.measure.live_model import LiveModel
from kvcore.memory.formats import mlx_cache
from kvcore.memory.formulas import weights_bytes
from kvcore.runtimes.mlx_lm import MLX_LM

LIVE_WEIGHT_FORMATS = ("fp32", "fp16", "bf16", "mlx-q8", "mlx-q4")

# The CPU demonstration model (random weights, no download): small enough that KV reads dominate
# decode time within minutes on a laptop CPU.
BUILTIN_CONFIGS: dict[str, dict] = {
    "cpu-demo": {
        "model_type": "llama",
        "hidden_size": 512,
        "num_hidden_layers": 8,
        "intermediate_size": 1024,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "vocab_size": 8192,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": True,
    },
}


# ---------------------------------------------------------------- models


def mlx_module(config: dict, name: str):
    """mlx_lm's own model class for a config, built lazily (no weights evaluated), or one sentence naming it."""
    from mlx_lm.utils import _get_classes

    try:
        model_class, args_class = _get_classes(config)
        return model_class(args_class.from_dict(config))
    except (ValueError, KeyError, TypeError) as e:
        raise KvError(
            f"mlx_lm cannot build {name!r} from its config: {e}.",
            "model_build",
            name=name,
            detail=str(e),
        ) from None


def resolve_config(model: str) -> tuple[str, dict]:
    """A preset, builtin name, config.json path or model directory -> (name, config dict)."""
    if model in BUILTIN_CONFIGS:
        return model, dict(BUILTIN_CONFIGS[model])
    path = Path(model)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise KvError(
                f"{model} is a folder without a config.json; that is not a model directory."
            )
        return path.name, read_config_file(path / "config.json")
    if (
        model.endswith(".json") or path.exists()
    ):  # a FIFO or a device is refused by the reader, not read
        return path.stem, read_config_file(path)
    if model in preset_names():
        return model, dict(load_preset(model)["config"])
    if looks_like_path(model):
        raise KvError(
            f"{model} does not exist; give a preset, cpu-demo, a config.json or a model folder."
        )
    if "/" in model:
        raise KvError(
            f"{model} is not a preset, a config.json or a model folder here; a Hugging Face id is loaded "
            "(downloaded by mlx_lm.load) by decode, mechanism and record."
        )
    known = [*BUILTIN_CONFIGS, *preset_names()]
    hint = did_you_mean(
        model.lower(), known, " Run `python -m kvcore presets` for the list (or use cpu-demo)."
    )
    raise KvError(f"Unknown model {model!r}.{hint}")


HUB_ID = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*"
)  # owner/name, as the hub spells them


def looks_like_path(text: str) -> bool:
    """A path a person typed (absolute, ./, ../, ~, a .json file or a folder separator beyond owner/name), not a hub id."""
    return (
        text.startswith(("/", "./", "../", "~", ".\\"))
        or text.endswith(".json")
        or os.sep in text.replace("/", "", 1)
        or (os.altsep is not None and text.count(os.altsep) > 1)
    ) and not Path(text).exists()


def _weights_kind(weights_format: str) -> tuple[str | None, int | None]:
    if weights_format not in LIVE_WEIGHT_FORMATS:
        raise KvError(
            f"Unknown weights format {weights_format!r}; valid here: {', '.join(LIVE_WEIGHT_FORMATS)}."
        )
    cache_class, bits = mlx_cache(
        weights_format
    )  # mlx-q<bits>: quantized with the same bits as its cache
    return (None, bits) if cache_class == "QuantizedKVCache" else (weights_format, None)


def build_random(
    name: str, config: dict, weights_format: str = "mlx-q4", dtype: str | None = None
) -> LiveModel:
    """A model with random weights from a config dict, via mlx_lm's own class dispatch; quantized
    like mlx_lm does (group 64) when weights_format is mlx-q8/mlx-q4.
    """
    import mlx.core as mx
    import mlx.nn as nn

    geometry = parse_config(config, name, MLX_LM)
    dtype = dtype or machine.backend()["dtype"]
    float_format, bits = _weights_kind(weights_format)
    module = mlx_module(config, name)
    module.set_dtype(mx_dtype(float_format or dtype))
    if bits:
        nn.quantize(
            module,
            group_size=GROUP_SIZE,
            bits=bits,
            class_predicate=lambda _, m: (
                hasattr(m, "to_quantized") and m.weight.shape[-1] % GROUP_SIZE == 0
            ),
        )
    mx.eval(module.parameters())
    return LiveModel(
        name, config, geometry, "random", weights_format, float_format or dtype, module
    )


def load_real(path_or_id: str) -> LiveModel:
    """A real model: a local directory through mlx_lm.utils.load_model (what mlx_lm.load uses, no
    tokenizer needed), or a Hugging Face id through mlx_lm.load (downloads it).
    """

    path = Path(path_or_id).expanduser()
    if not path.exists() and not HUB_ID.fullmatch(path_or_id):
        raise KvError(
            f"{path_or_id} does not exist (and is not a Hugging Face id like owner/name); give a model folder "
            "with *.safetensors or a hub id.",
            "model_load",
            name=path_or_id,
            detail="no such folder",
        )
    try:
        if path.is_dir():
            from mlx_lm.utils import load_model

            module, config = load_model(path)
        else:
            import mlx_lm

            module, _tokenizer, config = mlx_lm.load(path_or_id, return_config=True)
    except (OSError, ValueError) as e:
        raise KvError(
            f"Cannot load the model {path_or_id!r}: {e}.",
            "model_load",
            name=path_or_id,
            detail=str(e),
        ) from None
    except Exception as e:  # hub errors come in many types; one line for the reader
        raise KvError(
            f"Cannot load the model {path_or_id!r} ({type(e).__name__}: {e}).",
            "model_load",
            name=path_or_id,
            detail=f"{type(e).__name__}: {e}",
        ) from None
    quant = config.get("quantization") or config.get("quantization_config") or {}
    bits = quant.get("bits") if isinstance(quant, dict) else None
    dtype = _param_dtype(module)
    name = path.name if path.is_dir() else path_or_id
    return LiveModel(
        name,
        config,
        parse_config(config, name, MLX_LM),
        path_or_id,
        f"mlx-q{bits}" if bits else dtype,
        dtype,
        module,
    )


def _param_dtype(module) -> str:
    """The activation dtype a loaded model computes in: that of its scales (quantized) or its weights."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    names = {mx.float16: "fp16", mx.bfloat16: "bf16", mx.float32: "fp32"}
    params = tree_flatten(module.parameters())
    ordered = [v for k, v in params if k.endswith(".scales")] + [v for _, v in params]
    return next((names[v.dtype] for v in ordered if v.dtype in names), "fp16")


def get_model(model: str, weights: str = "random", weights_format: str = "mlx-q4") -> LiveModel:
    """--model / --weights / --weights-format -> a LiveModel (random weights unless told to load; the real
    model kvcore.measure.real_model ships is loaded from its installed GGUF unless --weights random)."""
    from kvcore.measure import real_model

    if model == real_model.NAME and weights is None:
        return load_real_model()
    if weights and weights != "random":
        return load_real(weights)
    if weights is None and is_loadable(model):
        return load_real(model)
    name, config = resolve_config(model)
    return build_random(name, config, weights_format)


def load_real_model(mode: str | None = None, dtype: str | None = None) -> LiveModel:
    """The real model kvcore.measure.real_model reads from its installed GGUF, as a LiveModel with its tokenizer: weights
    kept quantized on Metal and dequantized on the CPU backend unless `mode` says; activations fp16 on Metal, fp32 on
    the CPU unless `dtype` says."""
    from kvcore.measure import real_model

    b = machine.backend()
    mode = mode or real_model.weights_mode(b["backend"])
    dtype = dtype or b["dtype"]
    parts = real_model.build(mode, dtype)
    config = parts["config"]
    # weights_format: what sits in memory, in kvcore.memory.formulas' names: the file's own blocks, or plain dtype values
    return LiveModel(
        real_model.NAME,
        config,
        parse_config(config, real_model.NAME, MLX_LM),
        parts["path"],
        "gguf-file" if mode == "quantized" else dtype,
        dtype,
        parts["module"],
        tokenizer=parts["tokenizer"],
        weights_mode=mode,
        weights_note=parts["note"],
    )


def is_loadable(model: str) -> bool:
    """A model directory with weights, or something that looks like a Hugging Face id (owner/name)."""
    path = Path(model)
    if path.is_dir():
        return any(path.glob("*.safetensors"))
    return HUB_ID.fullmatch(model) is not None and not model.endswith(".json") and not path.exists()


def guess_weights_bytes(model: str, weights: str | None, weights_format: str) -> int | None:
    """Weights bytes before building the model (for the guard); None when unknown (hub id)."""
    from kvcore.measure import real_model

    if model == real_model.NAME and weights is None:
        path = real_model.require()
        if real_model.weights_mode(machine.backend()["backend"]) == "dequantized":
            name, config = resolve_config(model)
            return weights_bytes(parse_config(config, name, MLX_LM), "fp32")
        return path.stat().st_size
    source = (
        weights
        if weights and weights != "random"
        else (model if weights is None and is_loadable(model) else None)
    )
    if source:
        path = Path(source)
        return sum(f.stat().st_size for f in path.glob("*.safetensors")) if path.is_dir() else None
    name, config = resolve_config(model)
    return weights_bytes(parse_config(config, name, MLX_LM), weights_format)
