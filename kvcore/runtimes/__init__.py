"""Runtimes: what each runtime caches and how it allocates it. A base (what every runtime answers), one module
per runtime (mlx_lm, llama.cpp, reference), and the registry that names them.
"""
