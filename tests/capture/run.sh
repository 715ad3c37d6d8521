#!/usr/bin/env bash
# Runs this folder's pytest files in the project's venv (made by scripts/setup-python); other
# folders link to this script and run theirs.
# Extra arguments go to pytest. Exit 77 (skipped under ctest): no venv.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
ENV_FILE="${DELTA_VENV:-$ROOT/.venv}/delta-env.sh"
if [[ ! -f "$ENV_FILE" ]]; then
  echo "$HERE/run.sh: $ENV_FILE is missing; run scripts/setup-python first (skipped)" >&2
  exit 77
fi
# shellcheck source=/dev/null
source "$ENV_FILE"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 MPLBACKEND=Agg
cd "$ROOT"
exec python -m pytest -q -p no:cacheprovider "$@" "tests/$(basename "$HERE")"
