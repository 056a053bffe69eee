#!/usr/bin/env bash
# One idempotent set-up for every make target: system packages for Vulkan (loader, Mesa's lavapipe,
# the validation layer), glslc and the SPIR-V tools; a venv in .venv; the package with its dev extra.
# A second run takes a few seconds: each step checks before it acts.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS="libvulkan1 mesa-vulkan-drivers vulkan-tools vulkan-validationlayers glslc spirv-tools"
PY=${PYTHON:-python3}

missing=""
for p in $APT_PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  if ! command -v apt-get >/dev/null; then
    echo "vkML set-up: install these packages with your package manager:$missing" >&2
    echo "(the Vulkan loader, Mesa's lavapipe driver, the validation layer, glslc, SPIR-V tools)" >&2
    exit 1
  fi
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "vkML set-up: installing$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "vkML set-up: creating .venv"
  $PY -m venv .venv
fi
# Re-install only when pyproject.toml changed since the last install.
stamp=.venv/.vkml-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "vkML set-up: pip install -e .[dev]"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[dev]"
  touch "$stamp"
fi
