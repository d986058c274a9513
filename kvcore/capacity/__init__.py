"""Will it fit: a request (a model under a runtime's rules, its context, sequences, KV and weight formats, the
runtime's settings, the memory) and its typed result (sizes, the runtime's memory plan, the verdict and the
levers that make it fit), what the Calculator page and `calc` both read.

request.py holds the two types; calculator.py answers a request (sizes, verdict, levers); memory_fit.py holds a
runtime's whole plan against the memory a GPU may use (the limit, the part that passes it, the levers solved with
the plan). Below views and the CLI: they read it, it reads neither.
"""
