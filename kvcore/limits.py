"""The engine's limits on what it is asked, in one place: every number, list and text that reaches the engine
from a link, a widget, a config field, a GGUF key, a recording or the command line is checked against one of
these before anything proportional to it is built (beyond any real model or machine; a larger request is
refused in one sentence naming the field and the limit, never computed).
"""

MAX_CONTEXT = 100_000_000  # 1e8 tokens: beyond any model's position limit
MAX_SEQUENCES = 100_000
MAX_FIELD = (
    10**9
)  # any count or size in a config.json or a GGUF key (ranks, dimensions, heads, vocabulary)
MAX_LAYERS = 1024  # decoder layers in a config.json: the largest real models have ~130; the engine loops over layers
# mlx_lm's --prefill-step-size: its memory plan walks every chunk of the prompt (context / step of them, to
# MAX_CONTEXT), so a step below 64 would cost seconds per plan there; mlx_lm itself takes any positive step
MIN_PREFILL_STEP, MAX_PREFILL_STEP = 64, 1 << 20
MAX_UPDATES = 4096  # cache updates in a chunking pattern (the Nbytes trap: a demo, not a fuzzer)
MAX_DIGITS = 40  # digits of one number given as text (a link, a pasted list, a JSON integer): 10^40 is past every limit
# the memory a GGUF header's metadata may take once read (its keys, its numbers, the strings and arrays the
# engine reads): a real model's is tens of kB (its tokenizer is stepped over, never kept)
MAX_GGUF_METADATA_BYTES = 16 * 2**20
MAX_GGUF_TENSORS = (
    1 << 16
)  # tensor entries in a GGUF header: DeepSeek V3 has ~1,900, per-expert layouts ~14,000
MAX_LIST_TEXT = (
    65_536  # characters of a pasted list of numbers (4,096 updates written out in full fit)
)
MAX_BYTES = (
    1 << 60
)  # any byte count the engine reports (1 EiB: past every machine; sums of two stay inside int64)
# a pasted runtime log (kvcore.inputs.logs): a verbose llama.cpp load with every tensor and layer line is
# ~0.5 MB and ~3,000 lines; its longest lines (Ollama's environment, llama.cpp's system_info) ~2,000 characters
MAX_LOG_BYTES = 4_000_000
MAX_LOG_LINES = 50_000
MAX_LOG_LINE = 8_192
# a computer's RAM in GB (vendors' GB, as `calc --ram` and the Calculator take it): Macs ship 8 to 512 GB, a
# data-centre GPU 80 to 192 GB; room both ways, and nothing that formats as a 39-digit byte count or as 0 B
MIN_RAM_GB, MAX_RAM_GB = 1, 4096
MAX_TEXT_BYTES = 4_000_000  # a text for `kvcore quality` to read (a novel is ~1 MB)
# memory figures in one recording (`memory` rows, `benchmark` peaks): each is set beside a memory
# plan when shown (up to ~20 ms of CPU at 1,024 layers and 10^8 tokens); bundled ones hold at most 5
MAX_MEMORY_FIGURES = 32
MAX_DECIMALS = 6  # decimals a published figure is read at (sources print 1-3; 1e-300 is not 300)
MAX_QUOTE = 60  # characters of a reader's input a sentence quotes (kvcore.errors.quote): a prefix
# characters of text from outside a page shows (an upload's title or note, an error's sentence; kvsite.layout.plain)
MAX_SHOWN = 1_000
# A conversation script handed to a server's ledger (kvcore.servers): requests, distinct users, the JSON file's size,
# and the prompt cache's entries (--prompt-cache-size). The ledger walks every request and compares each prompt with
# every stored entry, so these bound its work (benchmarks/bench_servers.py measures the largest script accepted).
MAX_SCRIPT_REQUESTS = 4096
MAX_SCRIPT_USERS = 1024
MAX_SCRIPT_BYTES = 16_000_000
MAX_PROMPT_CACHE_ENTRIES = 256  # mlx_lm.server's default is 10
# The Many conversations chapter's conversation (kvcore.views.servers), and the Calculator's "as a server" and
# `calc --server` (kvcore.views.as_server): the users, turns and tokens a reader picks.
# users × turns (192 requests) stays far inside MAX_SCRIPT_REQUESTS, and the chapter runs the ledger once per lever
MAX_CHAPTER_USERS = 12
MAX_CHAPTER_TURNS = 16
# tokens of one user message or one reply: each turn adds both to the prompt, and the ledger's work grows with the
# prompt's prefill chunks (benchmarks/bench_servers.py measures the largest state against the default)
MAX_CHAPTER_TURN_TOKENS = 2048
