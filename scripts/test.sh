#!/usr/bin/env bash
# Installs everything the tests need (a virtual environment in .venv, Debian's chromium) and
# runs the whole suite: engine, live mlx, pages (AppTest), browser (Playwright + Chromium) and deployment
# (two replicas behind Debian's nginx; the requirements in a fresh virtual environment).
set -euo pipefail
cd "$(dirname "$0")/.."
missing=""
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing="$missing nginx"
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq && $sudo apt-get install -y -qq $missing >/dev/null
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
exec .venv/bin/python -m pytest "$@"
