"""Bytes: KV and weight formats from their real block layouts, the formulas that size a cache, and the
simulation of mlx_lm's allocator.
"""
