"""One exception type for input the engine refuses, carrying a sentence for the reader."""

# The errors a reader of the site can cause, by code: a front end says them in the reader's language
# from the code and the params (kvsite: errors.<code> in i18n/ja.yaml; English is str(e)).
CODES = frozenset(
    {
        "config_missing",
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
        "json_too_large",
        "json_invalid",
        "json_nested",
        "json_not_object",
        "format_group",
        "model_missing",
        "kv_option",
        "updates_bad",
        "updates_many",
        "updates_none",
        "model_build",
        "model_load",
        "guard_decode_fits",
        "guard_decode_none",
        "guard_growth_fits",
        "guard_growth_none",
        "live_batch_format",
        "live_batch_cache",
        # kvcore.textfile: a file handed to the engine (path on the command line, upload or paste on the site)
        "file_missing",
        "file_unreadable",
        "file_folder",
        "file_not_regular",
        "file_too_large",
        "file_binary",
        "file_not_utf8",
        # a GGUF file (kvcore.gguf_header, kvcore.gguf): a path on the command line or an upload on the site
        "gguf_not_gguf",
        "gguf_big_endian",
        "gguf_version",
        "gguf_truncated",
        "gguf_header_large",
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
        "gguf_upload_large",
        "gguf_upload_lost",
        "gguf_context",
        "weights_file",
        # a recording file (kvcore.recordings: a reader's upload on the site)
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
