"""Runs of English words on a Japanese page: what a reader sees (page text, chart text, tooltips of the
widgets, the uploader's own words), less the proper nouns the site writes as they are (chips, models,
runtimes, file names, URLs, code).

Example: english_runs("モデル Qwen3-32B を M4 Pro で、the cache grows with every token") -> ["the cache grows with every token"]
"""

from __future__ import annotations

import re
from functools import lru_cache

MIN_WORDS = 5  # a run this long is a sentence a Japanese reader was not given in Japanese

# A word: Latin letters (digits, dots, hyphens, apostrophes inside). Runs: words separated by spaces and the
# punctuation an English sentence carries; anything Japanese, a digit-only token or a line break ends a run.
WORD = r"[A-Za-z][A-Za-z0-9'’.\-]*"
RUN = re.compile(rf"{WORD}(?:[ ,;:()/&\"“”]+{WORD})+")
URL = re.compile(r"https?://\S+|\b[\w.-]+\.(?:com|org|io|dev|net|ai|jp|md|html)(?:/\S*)?")
FILE = re.compile(r"\b[\w.-]+\.(?:py|yaml|yml|json|gguf|csv|png|svg|toml|txt|safetensors)\b")

# Proper nouns and code the Japanese pages keep as written (ja_style.md: names of code and APIs, model names,
# units, quoted titles of English sources).
EXTRA = (
    "Apple Silicon",
    "Apple M",
    "Hugging Face",
    "Grouped-Query Attention",
    "Multi-Head Attention",
    "Multi-Query Attention",
    "Multi-head Latent Attention",
    "Intel(R) Xeon(R) Processor",
    "Intel(R) Xeon(R) CPU",
    "Streamlit Community Cloud",
    "Atomic Chat",
    "Google Research",
    "Apple newsroom",
    "Linux CPU",
    "Python",
    "Browse files",
    "Drag and drop file here",
    "Drag and drop files here",  # Streamlit's own, not settable (docs/site.md)
    "mlx_lm",
    "mlx-lm",
    "llama.cpp",
    "mlx[cpu]",
    "KVCache",
    "QuantizedKVCache",
    "RotatingKVCache",
    "TurboQuant",
    "PolarQuant",
    "QJL",
    "DeepSeek",
    "Llama",
    "Qwen",
    "Gemma",
    "Mistral",
    "Phi",
    "SmolLM",
    "Instruct",
    "Chat",
    "Dense",
    "Core",
    "Ultra",
    "Max",
    "Pro",
    "GPU",
    "CPU",
    "NVIDIA",
    "GeForce",
    "RTX",
    "Metal",
    "Accelerate",
    "OpenBLAS",
    "BLAS",
    "Ollama",
    "oMLX",
    "rapid-mlx",
    "ax-engine",
    "vllm-mlx",
)


@lru_cache(maxsize=1)
def proper_nouns() -> tuple[str, ...]:
    """Chip, model and runtime names the engine knows, plus EXTRA; longest first (so a long name goes whole)."""
    from kvcore.inputs.preset_files import preset_names
    from kvcore.recordings import store as recordings
    from kvcore.runtimes.registry import RUNTIMES
    from kvcore.timing import hardware

    names = set(EXTRA) | set(RUNTIMES) | set(preset_names())
    for chip in hardware.chips():
        names.add(chip.chip)
    recs, _ = recordings.load_all([recordings.recordings_dir()])
    for rec in recs:
        model = rec.data.get("model", {})
        for value in (
            model.get("name"),
            model.get("preset"),
            rec.data.get("hardware", {}).get("chip"),
        ):
            if value:
                names.add(str(value))
                names.add(str(value).split("/")[-1])
    return tuple(sorted(names, key=len, reverse=True))


def strip_allowed(text: str) -> str:
    """`text` with URLs, file names, inline code and proper nouns replaced by a mark that ends a run."""
    text = URL.sub(" ¦ ", text)
    text = FILE.sub(" ¦ ", text)
    text = re.sub(r"`[^`]*`", " ¦ ", text)
    text = re.sub(
        r"「[\x00-\x7f]+」", " ¦ ", text
    )  # an English source's title, quoted as written (ja_style.md)
    for name in proper_nouns():
        text = re.sub(
            rf"(?<![A-Za-z]){re.escape(name)}(?![A-Za-z])", " ¦ ", text, flags=re.IGNORECASE
        )
    return text


def english_runs(text: str, min_words: int = MIN_WORDS) -> list[str]:
    """Every run of `min_words` or more English words left in `text` once the allowed names are out."""
    out = []
    for line in strip_allowed(text).splitlines():
        for m in RUN.finditer(line):
            if len(re.findall(WORD, m.group(0))) >= min_words:
                out.append(m.group(0).strip())
    return out


# What a reader of the page sees, as text: the page (main and sidebar), each chart's SVG text, the help
# tooltips' and the uploader's own words (in the DOM), and the aria/titles Streamlit draws for widgets.
PAGE_TEXT_JS = """() => {
  const app = (document.querySelector("[data-testid='stApp']") || document.body).cloneNode(true);
  // code is code (a command, a Python line): only a code block's comments are the site's own words
  for (const pre of app.querySelectorAll("pre")) {
    pre.textContent = pre.textContent.split("\\n").map(l => l.includes("#") ? l.slice(l.indexOf("#")) : "").join("\\n");
  }
  for (const code of app.querySelectorAll("code")) code.textContent = " ";
  document.body.appendChild(app);
  app.style.position = "absolute"; app.style.left = "-99999px";
  const parts = [app.innerText];
  app.remove();
  for (const t of document.querySelectorAll("[data-testid='stVegaLiteChart'] svg text")) parts.push(t.textContent);
  for (const el of document.querySelectorAll("[data-testid='stFileUploader'] *")) {
    if (el.children.length === 0 && el.textContent.trim()) parts.push(el.textContent);
  }
  return parts.join("\\n");
}"""
