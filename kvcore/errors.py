"""One exception type for input the engine refuses, carrying a sentence for the reader."""


class KvError(ValueError):
    """Bad input: the message is one plain sentence meant for the reader (no traceback)."""
