#!/usr/bin/env bash
# A real llama-server from the llama.cpp source vendored in the pinned llama-cpp-python sdist
# (requirements-llamacpp.txt), built once into a cache and reused; prints the binary's path.
#
#   bash scripts/build_llama_server.sh
#
# The cache: $KVSITE_LLAMA_SERVER_CACHE, else ~/.cache/kvsite-llama-server. Nothing is done when the
# cached binary's `--version` names the commit the sdist vendors (a fraction of a second). Else pip
# downloads the sdist (kept in the cache), it is unpacked, and cmake builds the llama-server target
# only: Release, portable CPU code (GGML_NATIVE off), no tests, examples, web UI download or OpenSSL
# (a local server over plain HTTP), 2 parallel jobs (KVSITE_BUILD_JOBS to change).
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${KVSITE_LLAMA_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvsite-llama-server}"
pin="$(grep -o 'llama-cpp-python==[0-9.]*' requirements-llamacpp.txt)"
version="${pin#*==}"
src="$cache/src/llama_cpp_python-$version"
binary="$cache/build/bin/llama-server"
python="${PYTHON:-.venv/bin/python}"

vendored_commit() {  # the llama.cpp commit the sdist vendors (its git module's HEAD)
  head -c 7 "$src/.git/modules/vendor/llama.cpp/HEAD" 2>/dev/null || true
}

built() {  # the binary exists and names that commit
  [ -x "$binary" ] && "$binary" --version 2>&1 | grep -q "commit $1)"
}

commit="$(vendored_commit)"
if [ -n "$commit" ] && built "$commit"; then
  echo "$binary"
  exit 0
fi

mkdir -p "$cache/sdist" "$cache/src"
sdist="$cache/sdist/llama_cpp_python-$version.tar.gz"
if [ ! -f "$sdist" ]; then
  "$python" -m pip download -q --disable-pip-version-check --no-binary :all: --no-deps "$pin" \
    -d "$cache/sdist"
fi
rm -rf "$src" "$cache/build"
tar -xzf "$sdist" -C "$cache/src"
commit="$(vendored_commit)"
[ -n "$commit" ] || { echo "$sdist vendors no llama.cpp git module." >&2; exit 1; }
nice -n 10 cmake -S "$src/vendor/llama.cpp" -B "$cache/build" -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
  >"$cache/cmake.log" 2>&1 || { tail -20 "$cache/cmake.log" >&2; exit 1; }
nice -n 10 cmake --build "$cache/build" --target llama-server -j "${KVSITE_BUILD_JOBS:-2}" \
  >"$cache/build.log" 2>&1 || { tail -20 "$cache/build.log" >&2; exit 1; }
built "$commit" || { echo "$binary does not name llama.cpp commit $commit." >&2; exit 1; }
echo "$binary"
