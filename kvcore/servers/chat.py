"""A model folder's own tokenizer and chat template, as mlx_lm.server applies them to a request's messages.

mlx_lm.server (mlx-lm 0.32.2) tokenizes a chat request with `tokenizer.apply_chat_template(messages,
add_generation_prompt=True, tools=None, tokenize=True)` (server.py#L664-L668): transformers renders the folder's
template (tokenizer_config.json's `chat_template`, or chat_template.jinja) in a sandboxed jinja2 with
trim_blocks and lstrip_blocks, then encodes the text without adding special tokens. The same is done here from
the folder's tokenizer.json with the `tokenizers` package (imported only when a script with messages is read), so
the ledger finds the same tokens the server did; tests/test_servers.py holds it to mlx_lm's own tokenizer.
Example: ChatTokenizer.from_folder(path).prompt([("user", "Hi")])[:3] -> [1, 9690, 198]
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvcore.errors import KvError
from kvcore.inputs.textfile import read_text_file

MAX_TOKENIZER_BYTES = 64_000_000  # tokenizer.json files of 256k-token vocabularies are ~30 MB
MAX_CONFIG_TEXT = 4_000_000


@dataclass
class ChatTokenizer:
    """A folder's tokenizer.json and chat template; `eos_id` ends a reply the server stopped itself."""

    backend: Any = field(repr=False)
    template: Any = field(repr=False)
    special: dict = field(repr=False)  # bos_token, eos_token, ... as the template sees them
    eos_id: int = 0

    @classmethod
    def from_folder(cls, folder: str | Path) -> ChatTokenizer:
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment
        from tokenizers import Tokenizer

        folder = Path(folder)
        config_path = folder / "tokenizer_config.json"
        if not (folder / "tokenizer.json").is_file() or not config_path.is_file():
            raise KvError(
                f"{folder.name} holds no tokenizer.json and tokenizer_config.json: a script with messages "
                "needs the model's own tokenizer and chat template (or give counts only)."
            )
        config = json.loads(read_text_file(config_path, MAX_CONFIG_TEXT))
        template = config.get("chat_template")
        if template is None and (folder / "chat_template.jinja").is_file():
            template = read_text_file(folder / "chat_template.jinja", MAX_CONFIG_TEXT)
        if not isinstance(template, str):
            raise KvError(f"{folder.name} has no chat template for the ledger to render.")
        read_text_file(folder / "tokenizer.json", MAX_TOKENIZER_BYTES)  # bounded and text
        backend = Tokenizer.from_file(str(folder / "tokenizer.json"))
        special = {
            k: config[k]
            for k in ("bos_token", "eos_token", "pad_token", "unk_token")
            if isinstance(config.get(k), str)
        }
        eos = backend.token_to_id(special.get("eos_token", ""))
        if eos is None:
            raise KvError(f"{folder.name}'s eos_token is not a token of its tokenizer.")
        env = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]
        )
        return cls(backend, env.from_string(template), special, eos)

    def encode(self, text: str) -> list[int]:
        return self.backend.encode(text, add_special_tokens=False).ids

    def render(self, messages, add_generation_prompt: bool = True) -> str:
        return self.template.render(
            messages=[{"role": r, "content": c} for r, c in messages],
            add_generation_prompt=add_generation_prompt,
            tools=None,
            **self.special,
        )

    def prompt(self, messages) -> list[int]:
        """The request's prompt tokens, as the server builds them."""
        return self.encode(self.render(messages))

    def system_end(self, messages, prompt: list[int]) -> int:
        """Where the leading system messages end in `prompt` (0 when there are none): mlx_lm.server renders them
        with an empty user message and takes the first token that differs (server.py#L710-L723)."""
        n = next((i for i, (role, _) in enumerate(messages) if role != "system"), len(messages))
        if n == 0:
            return 0
        probe = self.encode(self.render([*messages[:n], ("user", "")], False))
        return next((i for i, (a, b) in enumerate(zip(probe, prompt)) if a != b), 0)

    def reply(self, text: str, completion_tokens: int, index: int) -> list[int]:
        """The tokens a reply of `completion_tokens` tokens was: its text's tokens, and the end token when it
        stopped by itself (one token more); KvError when the text is not those tokens."""
        ids = self.encode(text)
        if completion_tokens == len(ids) + 1:
            return [*ids, self.eos_id]
        if completion_tokens == len(ids):
            return ids
        raise KvError(
            f"Request {index + 1}'s reply is {len(ids):,} tokens, not the {completion_tokens:,} it says "
            "(give the reply as the server returned it)."
        )
