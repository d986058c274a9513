"""A GGUF file -> the geometry llama.cpp reads from it, and the exact bytes of its weights.

The geometry is read in llama.cpp's own terms, key by key as llama.cpp reads them at commit 0c1e570
(`src/llama-model.cpp` `load_hparams`, and each architecture's `load_arch_hparams` in `src/models/*.cpp`):
`{arch}.block_count` minus `nextn_predict_layers` (MTP layers the main context skips),
`attention.head_count(_kv)` (a number or one per layer; KV heads default to the heads),
`attention.key_length`/`value_length` (default embedding_length / head_count; `_swa` variants for
sliding layers), `attention.sliding_window` and `sliding_window_pattern` (a number n: layer il slides
when il % n < n - 1, `llama_hparams::set_swa_pattern`; or one flag per layer), MLA's `kv_lora_rank` and
`key_length_mla`/`value_length_mla`, and the recurrent layers (`attention.recurrent_layers`, else
every `full_attention_interval`-th layer attends) with their `ssm.*` sizes.
The weights are the tensor table: each tensor's values / block size x block bytes (gguf-py's
GGML_QUANT_SIZES), so a Q4_K_M or MXFP4 file is sized as it is stored.
Example: geometry("SmolLM2-135M-Instruct.Q4_1.gguf").layers[0] -> Layer(0, "full", 3, 64, 64)
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from kvcore.errors import KvError, quote
from kvcore.inputs.gguf_header import Header, Skipped, TensorInfo, read_header
from kvcore.limits import MAX_FIELD
from kvcore.model.geometry import FileWeights, Geometry, Layer, Params
from kvcore.model.layers import check_kv_heads, window_note
from kvcore.runtimes.llamacpp_cache import (
    NAME as LLAMA_CPP,  # a GGUF: llama.cpp's format, its rules
)

LLAMA_MAX_LAYERS = 512  # src/llama-hparams.h
# the keys llama.cpp reads as one number or one per layer (get_key_or_arr, get_arr): the only arrays kept
PER_LAYER = (
    "{arch}.attention.head_count",
    "{arch}.attention.head_count_kv",
    "{arch}.attention.sliding_window_pattern",
    "{arch}.attention.recurrent_layers",
    "{arch}.feed_forward_length",
)


@dataclass(frozen=True)
class Arch:
    """How llama.cpp reads one GGUF architecture (its load_arch_hparams), as data."""

    family: str  # kvcore.model.geometry FAMILIES model_type
    swa: str = (
        "none"  # "none"; "always" (window default swa_default); "if_set" (when sliding_window > 0);
    )
    #                    "disabled" (read, then switched off: Phi-3)
    swa_default: int = 0
    pattern: int = 1  # load_swa_pattern's default n_pattern
    mla: bool = False
    recurrent: bool = False
    ffn_halved: bool = False  # the dense MLP's tensors are n_ff/2 wide (qwen.cpp:33-35)


# general.architecture -> llama.cpp's reading (src/models/<file>.cpp @ 0c1e570)
ARCHS = {
    "llama": Arch("llama"),  # llama.cpp: no window for LLM_ARCH_LLAMA (Mistral 7B v0.1 runs full)
    "qwen": Arch("qwen", ffn_halved=True),  # the converter writes intermediate_size (base.py:1445)
    "qwen2": Arch("qwen2"),
    "qwen3": Arch("qwen3"),
    "qwen3moe": Arch("qwen3_moe"),
    "qwen3next": Arch(
        "qwen3_next", recurrent=True
    ),  # qwen3next.cpp: is_recr_impl from recurrent_layers or the interval
    "phi3": Arch("phi3", swa="disabled"),  # phi3.cpp: "Phi SWA is currently disabled"
    "gemma2": Arch(
        "gemma2", swa="always", swa_default=4096, pattern=2
    ),  # gemma2.cpp: n_swa = 4096, pattern 2
    "gemma3": Arch(
        "gemma3_text", swa="if_set", pattern=6
    ),  # gemma3.cpp: SWA when sliding_window > 0, pattern 6
    "gpt-oss": Arch(
        "gpt_oss", swa="always", pattern=2
    ),  # openai-moe.cpp: sliding_window required, pattern 2
    "deepseek2": Arch(
        "deepseek_v3", mla=True
    ),  # deepseek2.cpp: MLA when key_length_mla/value_length_mla are set
}


# what the reader keeps of a header beyond its numbers (gguf_header.read_header's `keep`): every other string or
# array (the tokenizer's, a chat template) is stepped over, never built
KEPT = frozenset(
    {"general.architecture", *(key.replace("{arch}", arch) for arch in ARCHS for key in PER_LAYER)}
)


class _Meta:
    """Typed reads of one architecture's keys; errors name the key."""

    def __init__(self, header: Header, arch: str, label: str):
        self.m, self.arch, self.label = header.metadata, arch, label

    def key(self, name: str) -> str:
        return name.replace("{arch}", self.arch)

    def has(self, name: str) -> bool:
        return self.key(name) in self.m

    def int(self, name: str, default: int | None = None, minimum: int = 1) -> int:
        key = self.key(name)
        value = self.m.get(key, default)
        if value is None:
            raise KvError(
                f"{self.label} has no {key!r}, which llama.cpp needs.",
                "gguf_missing",
                label=self.label,
                key=key,
            )
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not minimum <= value <= MAX_FIELD
        ):
            raise KvError(
                f"{self.label}: {key} = {quote(value)} is not a whole number from {minimum} to {MAX_FIELD:,}.",
                "gguf_value",
                label=self.label,
                key=key,
                value=quote(value),
            )
        return value

    def per_layer(
        self, name: str, n_layers: int, default: int | None = None, minimum: int = 0
    ) -> list[int]:
        """A key that is one number or one value per layer (llama_model_loader::get_key_or_arr)."""
        assert name in PER_LAYER, name  # kept by the reader (KEPT)
        key = self.key(name)
        value = self.m.get(key)
        if isinstance(value, array) or isinstance(value, Skipped) and value.array:
            if (
                isinstance(value, Skipped)
                or len(value) != n_layers
                or not all(isinstance(v, int) and minimum <= v <= MAX_FIELD for v in value)
            ):
                raise KvError(
                    f"{self.label}: {key} must hold {n_layers} whole numbers (one per layer).",
                    "gguf_layers",
                    label=self.label,
                    key=key,
                    n=n_layers,
                )
            return [int(v) for v in value]
        return [self.int(name, default, minimum)] * n_layers


def _architecture(header: Header, label: str) -> tuple[str, Arch]:
    arch = header.metadata.get("general.architecture")
    if not isinstance(arch, str):
        raise KvError(
            f"{label} has no 'general.architecture'.",
            "gguf_missing",
            label=label,
            key="general.architecture",
        )
    if arch not in ARCHS:
        known = ", ".join(ARCHS)
        raise KvError(
            f"{label} is a {quote(arch)} model, an architecture kvcore does not know; known: {known}.",
            "gguf_arch",
            label=label,
            arch=quote(arch),
            known=known,
        )
    return arch, ARCHS[arch]


def _swa_flags(meta: _Meta, spec: Arch, n_all: int) -> tuple[list[bool], int, list]:
    """(sliding per layer, n_swa, notes) as load_arch_hparams + llama_model_base::load_swa_pattern set them."""
    if spec.swa == "none":
        return [False] * n_all, 0, []
    n_swa = meta.int("{arch}.attention.sliding_window", spec.swa_default or None, minimum=0)
    if spec.swa == "disabled" or (spec.swa == "if_set" and not n_swa):
        notes = [window_note("sliding_disabled", n_swa)] if spec.swa == "disabled" and n_swa else []
        return [False] * n_all, 0, notes
    if not n_swa:
        raise KvError(
            f"{meta.label}: {meta.key('{arch}.attention.sliding_window')} must be at least 1.",
            "gguf_value",
            label=meta.label,
            key=meta.key("{arch}.attention.sliding_window"),
            value=n_swa,
        )
    pattern = meta.m.get(meta.key("{arch}.attention.sliding_window_pattern"))
    if isinstance(pattern, array) or isinstance(pattern, Skipped) and pattern.array:
        # one flag per layer (is_swa_impl)
        return (
            [bool(v) for v in meta.per_layer("{arch}.attention.sliding_window_pattern", n_all)],
            n_swa,
            [],
        )
    n = meta.int("{arch}.attention.sliding_window_pattern", spec.pattern, minimum=0)
    return [n == 0 or il % n < n - 1 for il in range(n_all)], n_swa, []


def _layers(meta: _Meta, spec: Arch) -> tuple[list[Layer], list]:
    n_all = meta.int("{arch}.block_count")
    if n_all > LLAMA_MAX_LAYERS:
        raise KvError(
            f"{meta.label}: {meta.key('{arch}.block_count')} = {n_all:,}; llama.cpp allows at most "
            f"{LLAMA_MAX_LAYERS}.",
            "gguf_value",
            label=meta.label,
            key=meta.key("{arch}.block_count"),
            value=n_all,
        )
    n_layer = n_all - meta.int(
        "{arch}.nextn_predict_layers", 0, minimum=0
    )  # llama_hparams::n_layer()
    if n_layer < 1:
        raise KvError(
            f"{meta.label} has no layers besides its {n_all} prediction layers.",
            "gguf_value",
            label=meta.label,
            key=meta.key("{arch}.nextn_predict_layers"),
            value=n_all - n_layer,
        )
    n_embd = meta.int("{arch}.embedding_length")
    heads = meta.per_layer("{arch}.attention.head_count", n_all, minimum=1)
    kv_heads = (
        meta.per_layer("{arch}.attention.head_count_kv", n_all)
        if meta.has("{arch}.attention.head_count_kv")
        else heads
    )
    k_full = meta.int("{arch}.attention.key_length", n_embd // heads[0])
    v_full = meta.int("{arch}.attention.value_length", n_embd // heads[0])
    k_swa = meta.int("{arch}.attention.key_length_swa", k_full)
    v_swa = meta.int("{arch}.attention.value_length_swa", v_full)
    sliding, n_swa, notes = _swa_flags(meta, spec, n_all)
    recurrent = [False] * n_all
    if spec.recurrent:
        if meta.has("{arch}.attention.recurrent_layers"):
            recurrent = [
                bool(v) for v in meta.per_layer("{arch}.attention.recurrent_layers", n_all)
            ]
        else:
            interval = meta.int("{arch}.full_attention_interval", 4)
            recurrent = [il < n_layer and (il + 1) % interval != 0 for il in range(n_all)]
        d_conv, d_inner = meta.int("{arch}.ssm.conv_kernel"), meta.int("{arch}.ssm.inner_size")
        d_state, n_group = meta.int("{arch}.ssm.state_size"), meta.int("{arch}.ssm.group_count")
        conv = (d_conv - 1) * (d_inner + 2 * n_group * d_state)  # llama_hparams::n_embd_r
        state = d_state * d_inner  # llama_hparams::n_embd_s
    mla = (
        spec.mla
        and meta.has("{arch}.attention.key_length_mla")
        and meta.has("{arch}.attention.value_length_mla")
    )
    layers = []
    for il in range(n_layer):
        if recurrent[il]:
            layers.append(Layer(il, "linear", conv_values=conv, state_values=state))
        elif mla:  # one latent row per token: K = kv_lora_rank + rope, stored as one KV head (kvcore: k_dim latent, v_dim rope)
            latent = meta.int("{arch}.attention.kv_lora_rank")
            if kv_heads[il] != 1 or k_full <= latent:
                raise KvError(
                    f"{meta.label}: an MLA model must have head_count_kv 1 and key_length above kv_lora_rank.",
                    "gguf_value",
                    label=meta.label,
                    key=meta.key("{arch}.attention.key_length"),
                    value=k_full,
                )
            layers.append(Layer(il, "mla", 1, latent, k_full - latent))
        elif sliding[il]:
            check_kv_heads(
                meta.label,
                meta.key("{arch}.attention.head_count"),
                heads[il],
                meta.key("{arch}.attention.head_count_kv"),
                kv_heads[il],
            )
            layers.append(Layer(il, "sliding", kv_heads[il], k_swa, v_swa, n_swa))
        else:
            check_kv_heads(
                meta.label,
                meta.key("{arch}.attention.head_count"),
                heads[il],
                meta.key("{arch}.attention.head_count_kv"),
                kv_heads[il],
            )
            layers.append(Layer(il, "full", kv_heads[il], k_full, v_full))
    return layers, notes


def tensor_bytes(tensor: TensorInfo, label: str = "the file") -> int:
    """Bytes of one tensor as stored: values / block values x block bytes (ggml_nbytes; gguf-py GGML_QUANT_SIZES).

    Example: a Q4_K [4096, 4096] tensor -> 65,536 blocks of 256 values x 144 B = 9,437,184 B.
    """
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    try:
        ggml_type = GGMLQuantizationType(tensor.ggml_type)
        block, size = GGML_QUANT_SIZES[ggml_type]
    except (ValueError, KeyError):
        raise KvError(
            f"{label}: the tensor {quote(tensor.name)} has a ggml type ({tensor.ggml_type}) gguf-py does not know.",
            "gguf_tensor_type",
            label=label,
            tensor=quote(tensor.name),
            type=tensor.ggml_type,
        ) from None
    if tensor.shape[0] % block:
        raise KvError(
            f"{label}: the tensor {quote(tensor.name)} has rows of {tensor.shape[0]} values, not a multiple of "
            f"{ggml_type.name}'s {block}.",
            "gguf_tensor_block",
            label=label,
            tensor=quote(tensor.name),
            type=ggml_type.name,
            block=block,
            dim=tensor.shape[0],
        )
    values = 1
    for n in tensor.shape:
        values *= n
    return values // block * size


def _type_name(ggml_type: int) -> str:
    from gguf.constants import GGMLQuantizationType

    return GGMLQuantizationType(ggml_type).name.lower()


def _weights(header: Header, meta: _Meta, label: str) -> tuple[FileWeights, Params, Params]:
    """Exact bytes per tensor type, and parameter counts split as kvcore.model.params.Params (routers, matrices, vectors).

    Also checks that every tensor lies inside the file. MoE expert tensors (`*_exps`) count
    expert_used_count / expert_count of themselves as read per token.
    """
    n_expert = meta.int("{arch}.expert_count", 0, minimum=0)
    n_used = meta.int("{arch}.expert_used_count", 0, minimum=0)
    total = active = 0
    by_type: dict[str, list[int]] = {}
    p_all, p_active = Params(), Params()
    for t in header.tensors:
        size = tensor_bytes(t, label)
        if t.offset % header.alignment or header.data_offset + t.offset + size > header.file_bytes:
            raise KvError(
                f"{label}: the tensor {quote(t.name)} lies past the end of the file ({header.file_bytes:,} bytes): the "
                "file is truncated or not a valid GGUF file.",
                "gguf_tensor_past_end",
                label=label,
                tensor=quote(t.name),
                size=header.file_bytes,
            )
        values = 1
        for n in t.shape:
            values *= n
        share = (n_used, n_expert) if "_exps." in t.name and n_expert else (1, 1)
        total += size
        active += size * share[0] // share[1]
        row = by_type.setdefault(_type_name(t.ggml_type), [0, 0, 0])
        row[0], row[1], row[2] = row[0] + 1, row[1] + values, row[2] + size
        kind = "router" if "ffn_gate_inp" in t.name else "matrix" if len(t.shape) > 1 else "vector"
        p = Params(**{kind: values})
        p_all, p_active = p_all + p, p_active + Params(**{kind: values * share[0] // share[1]})
    rows = tuple((name, *row) for name, row in sorted(by_type.items(), key=lambda kv: -kv[1][2]))
    return FileWeights(total, active, rows), p_all, p_active


def _ffn_widths(meta: _Meta, spec: Arch, names=(), file: bool = True) -> dict:
    """The feed-forward widths llama.cpp's graph holds (Geometry.ffn_width, expert_width, experts_used): n_ff of the
    widest dense layer (none in a MoE model without leading dense blocks; half of it where the architecture's
    tensors are n_ff/2 wide: Arch.ffn_halved), the routed experts' n_ff_exp and n_expert_used
    (llama_model_loader keys: feed_forward_length, expert_feed_forward_length, expert_used_count); `names`: the
    file's tensors (_linear_widths); `file` False: keys a log printed, where a dense width it did not print is 0."""
    n_layer = meta.int("{arch}.block_count")
    experts = meta.int("{arch}.expert_count", 0, minimum=0)
    dense = not experts or meta.int("{arch}.leading_dense_block_count", 0, minimum=0) > 0
    # a file's is required where a layer is dense: llama.cpp reads the key as optional (llama-model.cpp:1395) but
    # shapes each dense layer's FFN tensors from it, so a file without it fails at its first one ("has wrong shape",
    # llama-model-loader.cpp:917), where a width of 0 was once read here (tests/test_llamacpp_build.py)
    default = None if file else 0
    widths = meta.per_layer("{arch}.feed_forward_length", n_layer, default) if dense else [0]
    return {
        "ffn_width": max(widths) // (2 if spec.ffn_halved else 1),
        "expert_width": meta.int("{arch}.expert_feed_forward_length", 0, minimum=0)
        if experts
        else 0,
        "experts_used": meta.int("{arch}.expert_used_count", 0, minimum=0) if experts else 0,
        "experts": experts,
        "shared_expert_width": meta.int("{arch}.expert_shared_feed_forward_length", 0, minimum=0),
        "linear_widths": _linear_widths(meta, spec, names),
    }


def _linear_widths(meta: _Meta, spec: Arch, names) -> tuple[int, int, int, int]:
    """Geometry.linear_widths as qwen3next.cpp reads them (key = n_group x d_state, value = d_inner, n_v_heads =
    dt_rank, the input projection: `ssm_in`'s q, k, v and z in older files, else `attn_qkv`'s q, k, v), or ()."""
    if not (spec.recurrent and meta.has("{arch}.ssm.time_step_rank")):
        return ()
    key = meta.int("{arch}.ssm.group_count") * meta.int("{arch}.ssm.state_size")
    value, legacy = (
        meta.int("{arch}.ssm.inner_size"),
        any(n.endswith(".ssm_in.weight") for n in names),
    )
    return key, value, meta.int("{arch}.ssm.time_step_rank"), 2 * key + (2 if legacy else 1) * value


def _mla_widths(meta: _Meta, layers: list[Layer]) -> tuple[int, int, int]:
    """Geometry.mla_widths as deepseek2.cpp reads them: (q_lora_rank, 0 in the lite variants; key_length_mla
    minus the rope width; value_length_mla), or () without MLA."""
    mla = [layer for layer in layers if layer.kind == "mla"]
    if not mla:
        return ()
    return (
        meta.int("{arch}.attention.q_lora_rank", 0, minimum=0),
        meta.int("{arch}.attention.key_length_mla") - mla[0].v_dim,
        meta.int("{arch}.attention.value_length_mla"),
    )


def geometry_from_header(header: Header, name: str = "model.gguf") -> Geometry:
    """A parsed GGUF header -> the geometry llama.cpp builds from it (runtime llama.cpp), weights included."""
    arch, spec = _architecture(header, name)
    meta = _Meta(header, arch, name)
    layers, notes = _layers(meta, spec)
    weights, params, active = _weights(header, meta, name)
    tokens = header.metadata.get(
        "tokenizer.ggml.tokens"
    )  # stepped over: its length is all that matters
    n_tokens = tokens.count if isinstance(tokens, Skipped) and tokens.array else None
    names = {t.name for t in header.tensors}
    return Geometry(
        name=name,
        model_type=spec.family,
        runtime=LLAMA_CPP,
        layers=tuple(layers),
        hidden_size=meta.int("{arch}.embedding_length"),
        num_attention_heads=meta.per_layer(
            "{arch}.attention.head_count", meta.int("{arch}.block_count"), minimum=1
        )[0],
        vocab_size=meta.int("{arch}.vocab_size", n_tokens or 0, minimum=0),
        params=params,
        active_params=active,
        tie_word_embeddings="output.weight" not in names,
        notes=tuple(text for _, _, text in notes),
        note_codes=tuple((code, window) for code, window, _ in notes),
        max_position_embeddings=meta.int("{arch}.context_length"),
        file_weights=weights,
        **_ffn_widths(meta, spec, names),
        mla_widths=_mla_widths(meta, layers),
    )


def geometry(
    source: str | Path | bytes, name: str | None = None, file_bytes: int | None = None
) -> Geometry:
    """A GGUF file (a path, or an upload's bytes) -> its geometry under llama.cpp's rules, from the header only;
    `file_bytes`: the bytes are the header alone of a file of that size (gguf_header.read_header)."""
    label = name or (
        Path(source).name
        if not isinstance(source, (bytes, bytearray, memoryview))
        else "the uploaded file"
    )
    return geometry_from_header(read_header(source, label, file_bytes, KEPT), label)


def is_gguf_name(model: str) -> bool:
    """True for a model argument that names a GGUF file (by its extension)."""
    return str(model).lower().endswith(".gguf")


def geometry_from_keys(metadata: dict, name: str) -> Geometry:
    """A model's layers under llama.cpp's rules from its GGUF keys alone (kvcore.inputs.logs reads them back from
    a log's print_info lines): the same reading as a file's header, without a tensor table, so no weights.

    Example: geometry_from_keys({"general.architecture": "llama", "llama.block_count": 30, ...}, "log").layers[0]
    """
    keys = SimpleNamespace(metadata=metadata)  # a header's metadata without its tensors
    arch, spec = _architecture(keys, name)
    meta = _Meta(keys, arch, name)
    layers, notes = _layers(meta, spec)
    return Geometry(
        name=name,
        model_type=spec.family,
        runtime=LLAMA_CPP,
        layers=tuple(layers),
        hidden_size=meta.int("{arch}.embedding_length"),
        num_attention_heads=meta.int("{arch}.attention.head_count"),
        vocab_size=meta.int("{arch}.vocab_size", 0, minimum=0),
        params=Params(),
        active_params=Params(),
        tie_word_embeddings=False,
        notes=tuple(text for _, _, text in notes),
        note_codes=tuple((code, window) for code, window, _ in notes),
        max_position_embeddings=meta.int("{arch}.context_length", 0, minimum=0) or None,
        **_ffn_widths(meta, spec, file=False),
        mla_widths=_mla_widths(meta, layers),
    )
