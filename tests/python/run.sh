#!/usr/bin/env bash
# Runs the delta_torch tests in the project's venv (made by scripts/setup-python).
# DELTA_LIBRARY selects the libdelta.so under test; when unset, delta_torch's own lookup picks
# one (the newest build directory). Extra arguments go to pytest. Exit 77: no venv.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ENV_FILE="${DELTA_VENV:-$ROOT/.venv}/delta-env.sh"
if [[ ! -f "$ENV_FILE" ]]; then
  echo "tests/python/run.sh: $ENV_FILE is missing; run scripts/setup-python first (skipped)" >&2
  exit 77  # ctest's SKIP_RETURN_CODE: no venv means not run, not failed
fi
# shellcheck source=/dev/null
source "$ENV_FILE"

if [[ -z "${DELTA_LIBRARY:-}" ]]; then
  if DELTA_LIBRARY="$(python -c 'import sys, delta_torch
try:
    print(delta_torch.find_library())
except delta_torch.DeltaError as error:
    sys.exit(str(error))')"; then
    export DELTA_LIBRARY
    echo "tests/python/run.sh: DELTA_LIBRARY not set, using $DELTA_LIBRARY"
  else
    echo "tests/python/run.sh: no libdelta.so found; the tests that need it will be skipped" >&2
    unset DELTA_LIBRARY
  fi
fi

cd "$ROOT"
exec python -m pytest -q -p no:cacheprovider "$@" tests/python
