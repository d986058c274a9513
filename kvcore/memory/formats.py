"""Cache formats: bytes per cached row, from the real block layouts.

A *row* is one head's key (or value) vector for one token: `dim` values.
Example: row_bytes("mlx-q4", 64) -> 32 packed bytes + 2 groups x (scale + bias) x 2 B = 40.
Every format is one row of FORMATS (data): its layout, whether it pads, and who stores it; the lists
of formats a runtime stores and a cache class holds are derived from it (llamacpp_types, mlx_cache_formats),
and mlx_cache(name) is how a live run turns a name into mlx_lm's cache class and bits.
A row is checked when it is made (CacheFormat.__post_init__: bits its layout can hold, a block of a power of two
of values whose bytes hold its codes and scales, ggml's own block for a ggml name, a cache class and kind kvcore
knows) and the table refuses a name listed twice (format_table): one sentence naming the row, never a row dropped.
Sources: mlx_lm `QuantizedKVCache` (scales/biases in the activation dtype); ggml's blocks in
ggml-org/llama.cpp `ggml/src/ggml-common.h` (32 values per block: q8_0 34 B, q4_0 18 B, q4_1 20 B,
q5_0 22 B, q5_1 24 B, iq4_nl 18 B, from its static_asserts on sizeof(block_*)); AtomicBot-ai/atomic-llama-cpp-turboquant
`ggml-common.h`. llama.cpp's own type names (`ggml_type_name`: f32, f16) are accepted as aliases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvcore.errors import KvError, quote
from kvcore.memory.ggml_blocks import GGML_BLOCKS

DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1}

# How a format lays out a row, by kind (an unknown kind is refused when the row is made):
#   plain: dim values of bits/8 bytes each;  mlx: packed codes + one scale and bias per group (mlx_lm);
#   block: whole blocks of block_values values in block_bytes bytes each (ggml, the TurboQuant fork).
KINDS = ("plain", "mlx", "block")
PLAIN_BITS = (8, 16, 32)  # a plain value is whole bytes: fp8, fp16/bf16, fp32
# The bits mlx_lm's QuantizedKVCache(bits) quantizes with: those mx.quantize accepts (mlx 0.32.4: 1-6 and 8).
MLX_BITS = (1, 2, 3, 4, 5, 6, 8)
# The mlx_lm cache classes that hold a format (mlx_lm/models/cache.py), and the layout kind each holds.
MLX_CACHES = {"KVCache": "plain", "QuantizedKVCache": "mlx"}


@dataclass(frozen=True)
class CacheFormat:
    """One KV cache format, as data: its layout, and who stores it (one list per purpose, derived from here).

    pads: a block format whose row need not be a whole number of blocks (the row is zero-padded up to one);
    only the TurboQuant fork pads (AtomicBot-ai/atomic-llama-cpp-turboquant@088ae62, src/llama-kv-cache.cpp:
    "turbo zero-padding K head_dim"). ggml does not: `ggml_row_size` asserts `n % block_size == 0`, so a row that
    is not whole blocks is refused with a sentence, never padded silently.
    llamacpp: a type stock llama.cpp accepts for -ctk/-ctv (common/arg.cpp `kv_cache_types`,
    ggml-org/llama.cpp@145b6280d6aa1890e22457143dad0badb3fd6820: F32 F16 BF16 Q8_0 Q4_0 Q4_1 IQ4_NL Q5_0 Q5_1),
    under `ggml` (its ggml_type_name) when that differs from ours.
    mlx_cache: the mlx_lm cache class that holds it (KVCache in the activation dtype, QuantizedKVCache(bits)):
    what a live mlx_lm run can measure.
    """

    name: str
    kind: str  # one of KINDS
    bits: int  # bits of one stored value (plain) or one quantized code
    block_values: int = 1  # values per block (block)
    block_bytes: int = 0  # bytes per block incl. its scales (block)
    source: str = ""
    pads: bool = False  # block: a row is zero-padded to whole blocks (else refused)
    llamacpp: bool = False  # stock llama.cpp stores it (-ctk/-ctv)
    ggml: str = ""  # llama.cpp's name for it when not ours (f16, f32)
    mlx_cache: str = ""  # the mlx_lm cache class that holds it ("" : none)

    def __post_init__(self):
        if problem := self._problem():
            raise KvError(f"Cache format {self.name!r} {problem}.")

    def _problem(self) -> str:
        """What makes this row impossible ("" : nothing): bits, block and byte sizes that do not agree with its
        layout, a cache class or layout kind kvcore does not know."""
        if self.kind not in KINDS:
            return f"has the layout kind {self.kind!r}; known kinds: {', '.join(KINDS)}"
        if self.mlx_cache and self.mlx_cache not in MLX_CACHES:
            return f"is held by the cache class {self.mlx_cache!r}; mlx_lm's are {', '.join(MLX_CACHES)}"
        if self.mlx_cache and MLX_CACHES[self.mlx_cache] != self.kind:
            return f"is a {self.kind} format, but {self.mlx_cache} holds {MLX_CACHES[self.mlx_cache]} ones"
        if self.pads and self.kind != "block":
            return "pads its rows to whole blocks but is not a block format"
        if self.ggml == self.name:
            return "names itself as its llama.cpp alias (ggml is for a name that differs)"
        return getattr(self, f"_{self.kind}_problem")()

    def _plain_problem(self) -> str:
        if self.bits not in PLAIN_BITS:
            return f"stores plain values of {self.bits!r} bits; a plain value is {', '.join(map(str, PLAIN_BITS))} bits"
        if (self.block_values, self.block_bytes) != (1, 0):
            return "is a plain format with a block size (only block formats have blocks)"
        return ""

    def _mlx_problem(self) -> str:
        if self.bits not in MLX_BITS:
            return f"quantizes to {self.bits!r} bits; mlx quantizes with {', '.join(map(str, MLX_BITS))}"
        if (self.block_values, self.block_bytes) != (1, 0):
            return "is an mlx format with a block size (mlx_lm stores groups with a scale and bias, not blocks)"
        return ""

    def _block_problem(self) -> str:
        values, size = self.block_values, self.block_bytes
        if not isinstance(values, int) or values < 2 or values & (values - 1):
            return (
                f"has blocks of {values!r} values; a block is a power of two of values (ggml: 32 or 256, "
                "the TurboQuant fork: 128), so that it divides a head's row"
            )
        if not isinstance(self.bits, int) or not 1 <= self.bits <= 8:
            return f"stores {self.bits!r}-bit codes; a block format's codes are 1 to 8 bits"
        codes = math.ceil(values * self.bits / 8)
        if not isinstance(size, int) or not codes < size <= codes + values // 8:
            return (
                f"has blocks of {values} values in {size!r} bytes; {values} codes of {self.bits} bits take {codes} "
                f"bytes, and a block adds its scales: 1 to {values // 8} bytes more ({codes + 1} to "
                f"{codes + values // 8} in all)"
            )
        ggml = GGML_BLOCKS.get((self.ggml or self.name).upper())
        if ggml and ggml != (values, size):
            return (
                f"has blocks of {values} values in {size} bytes; ggml's {(self.ggml or self.name).upper()} block is "
                f"{ggml[0]} values in {ggml[1]} bytes (ggml-common.h)"
            )
        return ""

    def row_bytes(self, dim: int, group_size: int = 64, scale_dtype: str = "fp16") -> int:
        """Bytes one `dim`-value row takes in this format (K or V of one head, one token)."""
        if self.kind == "plain":
            return dim * self.bits // 8
        if self.kind == "mlx":
            if dim % group_size:
                raise KvError(  # mx.quantize refuses a last dimension its group size does not divide
                    f"{self.name} quantizes values in groups of {group_size}, and {group_size} does not divide this "
                    f"model's head_dim of {dim}; choose another KV format.",
                    "format_group",
                    format=self.name,
                    group=group_size,
                    dim=dim,
                )
            packed = dim * self.bits // 8  # uint32 words hold 32/bits codes
            return packed + 2 * (dim // group_size) * DTYPE_BYTES[scale_dtype]
        if dim % self.block_values and not self.pads:  # ggml_row_size asserts whole blocks
            raise KvError(
                f"{self.name} stores rows in whole blocks of {self.block_values} values and does not pad them: "
                f"a {dim}-value row is not a multiple of {self.block_values}.",
                "format_block",
                format=self.name,
                block=self.block_values,
                dim=dim,
            )
        return math.ceil(dim / self.block_values) * self.block_bytes

    def bits_per_value(
        self, dim: int = 128, group_size: int = 64, scale_dtype: str = "fp16"
    ) -> float:
        """Effective bits per cached value for a row of `dim` values (overhead and padding included)."""
        return 8 * self.row_bytes(dim, group_size, scale_dtype) / dim


_MLX, _QUANT = "KVCache", "QuantizedKVCache"


def format_table(*rows: CacheFormat) -> dict[str, CacheFormat]:
    """The table of formats by name, in order; a name (or llama.cpp alias) listed twice is refused, never dropped."""
    table: dict[str, CacheFormat] = {}
    for row in rows:
        for name in filter(None, (row.name, row.ggml)):
            if name in table or name in {f.ggml for f in table.values()}:
                raise KvError(
                    f"Cache format {name!r} is listed twice in the table of formats; each name is one row."
                )
        table[row.name] = row
    return table


FORMATS: dict[str, CacheFormat] = format_table(
    CacheFormat("fp32", "plain", 32, llamacpp=True, ggml="f32", mlx_cache=_MLX),
    CacheFormat("fp16", "plain", 16, llamacpp=True, ggml="f16", mlx_cache=_MLX),
    CacheFormat("bf16", "plain", 16, llamacpp=True, mlx_cache=_MLX),
    CacheFormat("fp8", "plain", 8, source="1-byte float (e4m3/e5m2), no scales"),
    CacheFormat("mlx-q8", "mlx", 8, source="mlx_lm QuantizedKVCache(bits=8)", mlx_cache=_QUANT),
    CacheFormat("mlx-q6", "mlx", 6, source="mlx_lm QuantizedKVCache(bits=6)", mlx_cache=_QUANT),
    CacheFormat("mlx-q5", "mlx", 5, source="mlx_lm QuantizedKVCache(bits=5)", mlx_cache=_QUANT),
    CacheFormat("mlx-q4", "mlx", 4, source="mlx_lm QuantizedKVCache(bits=4)", mlx_cache=_QUANT),
    CacheFormat("mlx-q3", "mlx", 3, source="mlx_lm QuantizedKVCache(bits=3)", mlx_cache=_QUANT),
    CacheFormat("mlx-q2", "mlx", 2, source="mlx_lm QuantizedKVCache(bits=2)", mlx_cache=_QUANT),
    CacheFormat(
        "q8_0",
        "block",
        8,
        *GGML_BLOCKS["Q8_0"],
        source="ggml block_q8_0: fp16 scale + 32 int8",
        llamacpp=True,
    ),
    CacheFormat(
        "q4_0",
        "block",
        4,
        *GGML_BLOCKS["Q4_0"],
        source="ggml block_q4_0: fp16 scale + 16 bytes",
        llamacpp=True,
    ),
    CacheFormat(
        "q4_1",
        "block",
        4,
        *GGML_BLOCKS["Q4_1"],
        source="ggml block_q4_1: fp16 scale + fp16 min + 16 bytes",
        llamacpp=True,
    ),
    CacheFormat(
        "iq4_nl",
        "block",
        4,
        *GGML_BLOCKS["IQ4_NL"],
        source="ggml block_iq4_nl: fp16 scale + 16 bytes (non-linear 4-bit codebook)",
        llamacpp=True,
    ),
    CacheFormat(
        "q5_0",
        "block",
        5,
        *GGML_BLOCKS["Q5_0"],
        source="ggml block_q5_0: fp16 scale + 4 bytes high bits + 16 bytes",
        llamacpp=True,
    ),
    CacheFormat(
        "q5_1",
        "block",
        5,
        *GGML_BLOCKS["Q5_1"],
        source="ggml block_q5_1: fp16 scale + fp16 min + 4 bytes high bits + 16 bytes",
        llamacpp=True,
    ),
    CacheFormat(
        "turbo4",
        "block",
        4,
        128,
        68,
        source="atomic-llama-cpp-turboquant ggml-common.h block_turbo4_0",
        pads=True,
    ),
    CacheFormat(
        "turbo3",
        "block",
        3,
        128,
        50,
        source="atomic-llama-cpp-turboquant ggml-common.h block_turbo3_0",
        pads=True,
    ),
    CacheFormat(
        "turbo2",
        "block",
        2,
        128,
        34,
        source="atomic-llama-cpp-turboquant ggml-common.h block_turbo2_0",
        pads=True,
    ),
)


# The formats the site compares by default (the Savings chapter's choice, the calculator's memory curves): fp16, the
# 8- and 4-bit ones of mlx_lm and of ggml, fp8 and TurboQuant's 3-bit; one list, every name a row above.
COMPARED = ("fp16", "fp8", "mlx-q8", "q8_0", "mlx-q4", "q4_0", "turbo3")


def padding_formats() -> tuple[str, ...]:
    """The block formats that zero-pad a row to whole blocks (the TurboQuant fork's turbo2/3/4)."""
    return tuple(name for name, f in FORMATS.items() if f.pads)


def llamacpp_types() -> tuple[str, ...]:
    """The K/V types stock llama.cpp stores (-ctk/-ctv), in the table's order."""
    return tuple(name for name, f in FORMATS.items() if f.llamacpp)


def mlx_cache_formats() -> tuple[str, ...]:
    """The formats an mlx_lm cache class holds (KVCache, QuantizedKVCache): what a live mlx_lm run measures."""
    return tuple(name for name, f in FORMATS.items() if f.mlx_cache)


def aliases() -> dict[str, str]:
    """llama.cpp's spellings (ggml_type_name) of our names: {"f32": "fp32", "f16": "fp16"}."""
    return {f.ggml: name for name, f in FORMATS.items() if f.ggml}


def ggml_name(name: str) -> str:
    """The name llama.cpp prints for a format (its ggml_type_name). Example: ggml_name("fp16") -> "f16"."""
    fmt = FORMATS.get(name)
    return fmt.ggml or name if fmt else name


def get_format(name: str) -> CacheFormat:
    """The format called `name` (or a llama.cpp alias such as f16), or a KvError listing the valid names."""
    try:
        return FORMATS[name] if name in FORMATS else FORMATS[aliases().get(name, name)]
    except (KeyError, TypeError):
        valid = ", ".join(FORMATS)
        raise KvError(
            f"Unknown cache format {quote(name)}; valid formats: {valid}.",
            "format_unknown",
            name=quote(name),
            valid=valid,
        ) from None


def mlx_cache(name: str) -> tuple[str, int | None]:
    """The mlx_lm cache class that holds format `name` and its bits (None: a KVCache keeps the plain dtype), or a
    KvError naming it and what mlx_lm's caches hold. The one place a live run turns a format name into a cache.

    Example: mlx_cache("mlx-q4") -> ("QuantizedKVCache", 4); mlx_cache("fp16") -> ("KVCache", None);
    mlx_cache("q8_0") -> KvError "... valid here: fp32, fp16, bf16, mlx-q8, ...".
    """
    fmt = FORMATS.get(name) if isinstance(name, str) else None
    if fmt is None or not fmt.mlx_cache:
        known = mlx_cache_formats()
        raise KvError(f"Unknown KV format {name!r}; valid here: {', '.join(known)}.")
    return fmt.mlx_cache, fmt.bits if fmt.kind == "mlx" else None


ACTIVATION_DTYPES = (
    "fp16",
    "bf16",
    "fp32",
)  # what mlx_lm keeps activations (and so cache scales) in


@dataclass(frozen=True)
class KvSpec:
    """How the cache is stored: K and V formats, mlx group size, activation dtype."""

    k_format: str = "fp16"
    v_format: str = "fp16"
    group_size: int = 64  # mlx quantized cache
    activation_dtype: str = "fp16"  # dtype of mlx scales/biases and of linear-attention conv state

    def __post_init__(self):
        # llama.cpp spellings (f16, f32) become the format's one name
        object.__setattr__(self, "k_format", get_format(self.k_format).name)
        object.__setattr__(self, "v_format", get_format(self.v_format).name)
        if self.group_size not in (32, 64, 128):
            raise KvError(f"mlx group size must be 32, 64 or 128, not {self.group_size}.")
        if self.activation_dtype not in ACTIVATION_DTYPES:
            raise KvError(
                f"activation dtype must be fp16, bf16 or fp32, not {quote(self.activation_dtype)}."
            )
