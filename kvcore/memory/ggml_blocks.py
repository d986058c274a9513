"""ggml's block layouts: how many values one block of a type holds and in how many bytes, for the KV formats
llama.cpp stores (kvcore.memory.formats) and the GGUF weight formats (kvcore.memory.weight_formats).

Source: ggml-org/llama.cpp @ 0c1e570, ggml/src/ggml-common.h (held to the gguf package's GGML_QUANT_SIZES by
tests/test_gguf.py). Example: GGML_BLOCKS["Q8_0"] -> (32, 34): 32 int8 codes and one fp16 scale.
"""

# ggml type name -> (values per block, bytes per block): the same pairs as the gguf package's GGML_QUANT_SIZES
GGML_BLOCKS: dict[str, tuple[int, int]] = {
    "F32": (1, 4),
    "F16": (1, 2),
    "BF16": (1, 2),
    "Q8_0": (32, 34),
    "Q4_0": (32, 18),
    "Q4_1": (32, 20),
    "Q5_0": (32, 22),
    "Q5_1": (32, 24),
    "IQ4_NL": (32, 18),
    "Q4_K": (256, 144),
    "Q5_K": (256, 176),
    "Q6_K": (256, 210),
    "MXFP4": (32, 17),
}
