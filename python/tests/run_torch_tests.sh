#!/usr/bin/env bash
# The loom package's torch.nn.Module path (the tests named *torch*), run by
# the set-up's .venv Python, which has PyTorch (scripts/setup.sh); CTest's
# loom-python-torch. Debian's Python, which runs the rest (loom-python),
# has no PyTorch. Without it: exit 77 (skipped), or 1 under
# LOOM_REQUIRE_ORACLES=1 (scripts/test.sh, CI).
#   run_torch_tests.sh REPO PYTHONPATH
set -uo pipefail
repo=$1
python="${LOOM_VENV:-$repo/.venv}/bin/python"
if ! "$python" -c "import torch, pytest, numpy" 2>/dev/null; then
  echo "run_torch_tests.sh: $python cannot import torch, pytest and numpy" \
       "(scripts/setup.sh installs them)"
  [ "${LOOM_REQUIRE_ORACLES:-0}" = 1 ] && exit 1
  exit 77
fi
PYTHONPATH=$2 PYTHONDONTWRITEBYTECODE=1 exec "$python" -m pytest -q \
  -p no:cacheprovider -k torch "$repo/python/tests"
