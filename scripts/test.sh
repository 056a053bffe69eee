#!/usr/bin/env bash
# The whole test run, `make test`: set-up, then the notebooks/vkml sync check, then ONE pytest session
# (every notebook, the sync/wheel/README/docs checks, the unit tests), so the run ends on pytest's
# summary line. Extra arguments go to pytest (e.g. `scripts/test.sh -k tensor --runslow`).
set -euo pipefail
cd "$(dirname "$0")/.."

t0=$(date +%s)
scripts/setup.sh --docs
t1=$(date +%s)
echo "vkML test: set-up took $((t1 - t0)) s"

# 1. vkml/ is generated from nbs/: exporting must change nothing. Compared by content (not `git status`),
#    so uncommitted work that is in sync passes, and a copy without .git works too.
snapshot() { find vkml nbs -type f \( -name '*.py' -o -name '*.ipynb' \) -not -path '*/__pycache__/*' \
               -not -path '*/.ipynb_checkpoints/*' -print0 | sort -z | xargs -0 -r sha256sum; }
before=$(snapshot)
.venv/bin/nbdev-export
after=$(snapshot)
if [ "$before" != "$after" ]; then
  echo "vkML test: FAILED: nbdev-export changed these files, so vkml/ and nbs/ had drifted apart:" >&2
  { diff <(echo "$before") <(echo "$after") || true; } | grep '^[<>]' | awk '{print "  " $3}' | sort -u >&2
  echo "Edit the notebooks, never vkml/; then run .venv/bin/nbdev-export and commit both." >&2
  exit 1
fi
echo "vkML test: nbdev-export changed nothing ($(( $(date +%s) - t1 )) s)"

# 2. Everything else in one pytest session. The Khronos validation layer watches every Vulkan call.
export VKML_VALIDATION=1
exec .venv/bin/python -m pytest tests/ --durations=10 "$@"
