"""kvcore: exact KV-cache arithmetic, mlx_lm's and llama.cpp's allocation, the decode model and live measurement.

Packages, bottom to top: model (geometry, config, families, parameters), memory (formats, formulas, allocation),
runtimes, inputs (config.json, GGUF, presets), timing (chips, the decode model, time to first token),
recordings, fits (the time model fitted to recorded runs), views (frames and charts), measure (the only
place mlx and llama-cpp-python are imported), cli. Importing kvcore loads nothing: no Streamlit, Altair, mlx,
library or file.
"""

__version__ = "0.1.0"
