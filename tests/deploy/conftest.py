"""Deployment tests: real replicas (`python -m streamlit run`), Debian's nginx, a fresh virtual environment."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
