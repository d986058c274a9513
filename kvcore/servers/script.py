"""A conversation script: the requests a server was sent, in order, each from one user.

Two shapes, one per request (JSON, a list):
- as sent: `{"user": "a", "messages": [{"role": "user", "content": "..."}, ...], "reply": "...",
  "completion_tokens": 64}` (the request's messages and the reply it got; the ledger tokenizes them with the
  model's own tokenizer and chat template);
- counts only: `{"user": "a", "prompt_tokens": 380, "completion_tokens": 64}` (then each user's prompt is assumed
  to extend that user's previous prompt and reply, re-rendered token for token, and users share no prefix).
Bounded before any work (kvcore.limits): the file's size, the requests, the distinct users, every count.
Example: parse_script('[{"user": "a", "prompt_tokens": 10, "completion_tokens": 5}]')[0].prompt_tokens -> 10
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from kvcore.errors import KvError, quote
from kvcore.limits import (
    MAX_CONTEXT,
    MAX_DIGITS,
    MAX_SCRIPT_BYTES,
    MAX_SCRIPT_REQUESTS,
    MAX_SCRIPT_USERS,
)

ROLES = ("system", "user", "assistant")
MAX_USER_NAME = 64  # characters of a user's name


@dataclass(frozen=True)
class ScriptRequest:
    """One request of a script: who sent it, its messages and the reply (or only its prompt's token count)."""

    user: str
    completion_tokens: int
    messages: tuple[tuple[str, str], ...] | None = None  # (role, content)
    reply: str | None = None
    prompt_tokens: int | None = None  # counts only

    @property
    def counts_only(self) -> bool:
        return self.messages is None


def _count(value, field: str, index: int, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_CONTEXT:
        raise KvError(
            f"Request {index + 1}'s {field} must be a whole number from {low} to {MAX_CONTEXT:,}, "
            f"not {quote(value)}."
        )
    return value


def _messages(value, index: int) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list) or not value:
        raise KvError(f"Request {index + 1}'s messages must be a non-empty list.")
    out = []
    for m in value:
        if (
            not isinstance(m, dict)
            or m.get("role") not in ROLES
            or not isinstance(m.get("content"), str)
        ):
            raise KvError(
                f"Request {index + 1} holds a message {quote(m)} that is not "
                f'{{"role": one of {", ".join(ROLES)}, "content": text}}.'
            )
        out.append((m["role"], m["content"]))
    return tuple(out)


def _request(item, index: int) -> ScriptRequest:
    if not isinstance(item, dict):
        raise KvError(f"Request {index + 1} is {quote(item)}, not an object.")
    user = item.get("user")
    if not isinstance(user, str) or not 0 < len(user) <= MAX_USER_NAME:
        raise KvError(
            f"Request {index + 1}'s user must be a name of 1 to {MAX_USER_NAME} characters."
        )
    keys = set(item)
    completion = item.get("completion_tokens")
    if keys in (
        {"user", "prompt_tokens", "completion_tokens"},
        {"user", "messages", "reply", "completion_tokens"},
    ):
        completion = _count(completion, "completion_tokens", index, 1)
    if keys == {"user", "prompt_tokens", "completion_tokens"}:
        prompt = _count(item["prompt_tokens"], "prompt_tokens", index, 1)
        return ScriptRequest(user, completion, prompt_tokens=prompt)
    if keys == {"user", "messages", "reply", "completion_tokens"}:
        if not isinstance(item["reply"], str):
            raise KvError(f"Request {index + 1}'s reply must be text.")
        return ScriptRequest(user, completion, _messages(item["messages"], index), item["reply"])
    raise KvError(
        f"Request {index + 1} has the keys {quote(sorted(keys))}; a request is "
        '{"user", "messages", "reply", "completion_tokens"} or {"user", "prompt_tokens", '
        '"completion_tokens"}.'
    )


def _json_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_DIGITS:
        raise KvError(f"The script holds a number of more than {MAX_DIGITS} digits.")
    return int(digits)


def parse_script(text: str) -> tuple[ScriptRequest, ...]:
    """The script's JSON text -> its requests; KvError (one sentence) for anything else, before any work."""
    if len(text) > MAX_SCRIPT_BYTES:
        raise KvError(
            f"The script is {len(text):,} characters long; at most {MAX_SCRIPT_BYTES:,}, please."
        )
    head = text.lstrip()[:1]
    if head != "[":
        raise KvError("The script must be a JSON list of requests.")
    if text.count('"user"') > MAX_SCRIPT_REQUESTS:  # before parsing: a request names its user once
        raise KvError(f"The script holds more than {MAX_SCRIPT_REQUESTS:,} requests.")
    try:
        data = json.loads(text, parse_int=_json_int)
    except json.JSONDecodeError as e:
        raise KvError(
            f"The script is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}."
        ) from None
    except RecursionError:
        raise KvError("The script is nested too deeply.") from None
    if not isinstance(data, list) or not data:
        raise KvError("The script must be a non-empty JSON list of requests.")
    if len(data) > MAX_SCRIPT_REQUESTS:
        raise KvError(
            f"The script holds {len(data):,} requests; at most {MAX_SCRIPT_REQUESTS:,}, please."
        )
    requests = tuple(_request(item, i) for i, item in enumerate(data))
    if len({r.counts_only for r in requests}) > 1:
        raise KvError("A script gives every request as messages, or every request as counts.")
    users = len({r.user for r in requests})
    if users > MAX_SCRIPT_USERS:
        raise KvError(f"The script has {users:,} users; at most {MAX_SCRIPT_USERS:,}, please.")
    return requests
