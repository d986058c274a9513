"""One exception type for input the engine refuses, carrying a sentence for the reader; `quote`, the one way a
sentence echoes what it was given (at most a short prefix)."""

from kvcore.limits import MAX_QUOTE

# The errors a reader of the site can cause, by code: a front end says them in the reader's language
# from the code and the params (kvsite: errors.<code> in i18n/ja.yaml; English is str(e)).
CODES = frozenset(
    {
        "config_missing",
        "rec_short_label",
        "setting_texts",
        "format_unknown",
        "config_not_whole",
        "config_range",
        "config_not_bool",
        "config_layer_types",
        "config_head_dim",
        "config_heads",
        "config_object",
        "config_shape",
        "model_unknown",
        "runtime_unknown",
        "llamacpp_format",
        "runtime_format",
        "runtime_kv_pair",
        "format_block",
        "llamacpp_mla_types",
        "llamacpp_seq_max",
        "llamacpp_ubatch",
        "llamacpp_flash_attn",
        "llamacpp_quantized_v_needs_fa",
        "llamacpp_backend",
        "macos_version",
        "json_too_large",
        "json_invalid",
        "json_nested",
        "json_digits",
        "config_list",
        "json_not_object",
        "format_group",
        "model_missing",
        "kv_option",
        "updates_bad",
        "updates_many",
        "updates_none",
        "updates_digits",
        "updates_long",
        "number_text",  # kvcore.numbers: a whole number written as text
        "kv_heads",
        "no_attention",
        "total_range",
        "model_build",
        "model_load",
        "guard_decode_fits",
        "guard_decode_none",
        "guard_growth_fits",
        "guard_growth_none",
        "live_batch_format",
        "live_batch_cache",
        # kvcore.inputs.textfile: a file handed to the engine (path on the command line, upload or paste on the site)
        "file_missing",
        "file_unreadable",
        "file_folder",
        "file_not_regular",
        "file_too_large",
        "file_binary",
        "file_not_utf8",
        # a GGUF file (kvcore.inputs.gguf_header, kvcore.inputs.gguf): a path on the command line or an upload on the site
        "gguf_not_gguf",
        "gguf_big_endian",
        "gguf_version",
        "gguf_truncated",
        "gguf_header_large",
        "gguf_metadata_large",
        "gguf_nested_array",
        "gguf_corrupt",
        "gguf_corrupt_detail",
        "gguf_count",
        "gguf_missing",
        "gguf_value",
        "gguf_layers",
        "gguf_arch",
        "gguf_tensor_type",
        "gguf_tensor_block",
        "gguf_tensor_past_end",
        "gguf_runtime",
        "gguf_header_short",
        "gguf_browser_large",
        "gguf_browser_bad",
        "gguf_browser_unread",
        "gguf_upload_lost",
        "gguf_context",
        "weights_file",
        # a recording file (kvcore.recordings.store: a reader's upload on the site)
        "rec_too_large",
        "rec_not_utf8",
        "rec_yaml_at",
        "rec_yaml",
        "rec_yaml_value",
        "rec_not_recording",
        "rec_schema",
        "rec_kind",
        "rec_missing",
        "rec_not_mapping",
        "rec_not_text",
        "rec_no_sections",
        "rec_section",
        "rec_rows",
        "rec_row",
        "rec_field",
        "rec_number",
        "rec_range",
        "rec_negative",
        "rec_url",
        "rec_grade",
        "rec_format",
        "rec_flag",
        "rec_list",
        "rec_count",
        "rec_alias",
        "rec_nodes",
        "rec_depth",
        "rec_scalar",
        "rec_top_key",
        "rec_duplicate_key",
        "rec_url_host",
        "rec_date",
        "rec_chip",
        "rec_chip_stated",
        "rec_preset",
        "rec_config",
        "rec_memory_word",
        "rec_whole",
        "rec_kv_format",
        # a pasted runtime log (kvcore.inputs.logs)
        "log_lines_many",
        "log_line_long",
        "rec_scope",
        "rec_positions",
        "rec_share",
        "rec_verdict",
        "rec_figures",
        # a conversation for a server's ledger (kvcore.servers; the Many conversations chapter's widgets)
        "server_context",
        # the Calculator's "as a server" (kvcore.views.as_server)
        "server_bound",
        "server_runtime",
        "server_mlx_format",
        "server_slot",
        "server_layers",
    }
)


class KvError(ValueError):
    """Bad input: the message is one plain sentence meant for the reader (no traceback).

    Errors a reader of the site can cause also carry a `code` (one of CODES) naming the sentence and the
    `params` it quotes, so a front end can say it in another language. The English sentence has one home,
    the raise site; str(e) is it.
    """

    def __init__(self, message: str, code: str | None = None, **params):
        if code is not None and code not in CODES:
            raise ValueError(f"unknown KvError code {code!r}")
        super().__init__(message)
        self.code = code
        self.params = params

    def bare(self) -> "KvError":
        """The same sentence, code and params with no traceback, cause or context: what a session may keep (a
        raised error's traceback holds every frame it passed, and their locals: a parser's buffers)."""
        return KvError(str(self), self.code, **self.params)


class Quoted(str):
    """A quoted input: its text is the quote, and so is its repr (a translation's {value!r} shows the same)."""

    def __repr__(self) -> str:
        return str(self)


def quote(value, limit: int = MAX_QUOTE) -> Quoted:
    """repr(value) cut to a short prefix (with how much was left out): what an error sentence may repeat of a
    reader's input, here and in every translation (a 1 MB architecture name is quoted, never echoed whole).

    The marks are the same in every language: a cut string ends in …, a huge number is ~10^digits.
    Example: quote("x" * 1000) -> 'xxxx…xxxx…' (60 x's); quote("ab") -> 'ab'; quote(10**5000) -> ~10^5000.
    """
    if isinstance(value, Quoted):
        return value
    if isinstance(value, str):
        if len(value) <= limit:
            return Quoted(repr(value))
        text = repr(value[:limit])
        return Quoted(f"{text[:-1]}…{text[-1]}")
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4 * limit:
        return Quoted(f"{'-' if value < 0 else ''}~10^{int(value.bit_length() * 0.30103)}")
    if isinstance(value, (list, tuple)) and len(value) > 8:
        text = repr(type(value)(value[:8]))
        return Quoted(f"{text[:limit]}…")
    if isinstance(value, dict) and len(value) > 8:
        return Quoted(f"{repr(dict(list(value.items())[:8]))[:limit]}…")
    text = repr(value)
    return Quoted(text if len(text) <= limit else text[:limit] + "…")


def did_you_mean(name: str, known, otherwise: str = "", cutoff: float = 0.6, n: int = 3) -> str:
    """The hint an "unknown name" sentence ends with: the nearest known names, else `otherwise`.

    Example: did_you_mean("qwen3-4", ["qwen3-4b", "qwen3-8b"]) -> " Did you mean qwen3-4b, qwen3-8b?"
    """
    import difflib

    close = difflib.get_close_matches(name, list(known), n=n, cutoff=cutoff)
    return f" Did you mean {', '.join(close)}?" if close else otherwise
