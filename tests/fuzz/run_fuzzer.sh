#!/usr/bin/env bash
# run_fuzzer.sh FUZZER CORPUS_DIR SECONDS SEED_DIR [DICTIONARY]
# Seeds the corpus with the small files of SEED_DIR (the fuzzer's max_len keeps inputs small),
# then fuzzes for SECONDS, mutating with the words of DICTIONARY when given. Exit 77 when the
# fuzzer was not built (ctest: skipped).
set -euo pipefail
fuzzer="$1" corpus="$2" seconds="$3" seeds="$4" dictionary="${5:-}"
if [[ ! -x "$fuzzer" ]]; then
  echo "$fuzzer not built (clang++ cannot build libFuzzer targets): skipped"
  exit 77
fi
mkdir -p "$corpus"
if [[ -d "$seeds" ]]; then
  find "$seeds" -maxdepth 1 -type f -size -64k -exec cp -f {} "$corpus/" \;
fi
extra=()
if [[ -n "$dictionary" ]]; then extra+=(-dict="$dictionary"); fi
exec "$fuzzer" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 "${extra[@]}" "$corpus"
