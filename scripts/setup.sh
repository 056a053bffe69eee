#!/usr/bin/env bash
# One idempotent set-up for every make target: system packages for Vulkan (loader, Mesa's lavapipe,
# the validation layer), glslc and the SPIR-V tools; a venv in .venv; the package with its dev extra
# (which includes the distributed extra: mpi4py, and MPICH from its wheel, with .venv/bin/mpiexec).
# A second run takes a few seconds: each step checks before it acts.
# `--docs` also installs what the docs build and its tests need: Chromium, for the pages' screenshots
# (best effort: on Ubuntu `chromium` is a snap, and the screenshot test then skips or, in CI, fails).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS="libvulkan1 mesa-vulkan-drivers vulkan-tools vulkan-validationlayers glslc spirv-tools"
APT_DOCS_PKGS="chromium"
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

if [ "${1:-}" = "--docs" ]; then
  for p in $APT_DOCS_PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" && continue
    command -v apt-get >/dev/null || { echo "vkML set-up: install $p for the docs screenshots" >&2; continue; }
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    echo "vkML set-up: installing $p (docs)"
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$p" >/dev/null; } \
      || echo "vkML set-up: could not install $p; the docs screenshot test will skip" >&2
  done
fi

if [ ! -x .venv/bin/python ]; then
  echo "vkML set-up: creating .venv"
  $PY -m venv .venv
fi
# Re-install only when pyproject.toml changed since the last install.
stamp=.venv/.vkml-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "vkML set-up: pip install -e .[dev]"
  # pip's and setuptools' chatter goes to a log, shown only when the install fails
  { .venv/bin/python -m pip install -q --upgrade pip && .venv/bin/python -m pip install -q -e ".[dev]"; } \
    > .venv/pip-install.log 2>&1 || { cat .venv/pip-install.log >&2; exit 1; }
  touch "$stamp"
fi
echo "vkML set-up: ready in ${SECONDS} s"
