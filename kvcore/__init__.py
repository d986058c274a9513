"""kvcore: exact KV-cache arithmetic, mlx_lm allocation, decode model and live measurement.

Importing kvcore never imports Streamlit, Altair or mlx: `kvcore.live` imports mlx lazily.
"""

__version__ = "0.1.0"
