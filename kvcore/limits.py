"""The engine's limits on what it is asked: the longest context and the most sequences any calculation takes
(beyond any real model or machine; a larger request is refused in one sentence, never computed).
"""

MAX_CONTEXT = 100_000_000  # 1e8 tokens: beyond any model's position limit
MAX_SEQUENCES = 100_000
