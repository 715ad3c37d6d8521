#!/usr/bin/env bash
# scripts/gpu-check --skip-build on a build configured in another checkout: the build stage
# alone (no GPU needed) must point every ctest path at this checkout and this build folder,
# run the LD_PRELOAD tests under the Python given, replace a cmake this machine lacks, and make
# again the library links a copy lost.
#   gpu_check_relocation.sh REPOSITORY_ROOT
set -euo pipefail
root="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
build="$work/carried-build"
old=/nonexistent/old-checkout
mkdir -p "$build/src" "$build/tests/gpu/stub_driver"
cat > "$build/CMakeCache.txt" <<CACHE
CMAKE_HOME_DIRECTORY:INTERNAL=$old
CMAKE_CACHEFILE_DIR:INTERNAL=$old/build-gpu
Python3_EXECUTABLE:UNINITIALIZED=$old/.venv/bin/python3
CMAKE_COMMAND:INTERNAL=/nonexistent/bin/cmake
CACHE
cat > "$build/tests/gpu/CTestTestfile.cmake" <<TESTS
add_test([=[preload_shim]=] "$old/.venv/bin/python3" "$old/tests/preload/run_preload_test.py" "$old/build-gpu/tests/preload/preload_probe")
add_test([=[no_cuda_link]=] "/nonexistent/bin/cmake" "-P" "$old/tests/gpu/check_no_cuda_link.cmake")
TESTS
: > "$build/src/libdelta.so.0.1.0"
ln -s /nonexistent/stubs/libcuda.so "$build/tests/gpu/stub_driver/libcuda.so.1"

python="$(command -v python3)"
"$root/scripts/gpu-check" --skip-build --build-dir "$build" --python python3 --stage build

tests="$build/tests/gpu/CTestTestfile.cmake"
fail() { echo "FAIL: $*"; cat "$tests"; exit 1; }
grep -q "$old" "$tests" && fail "the old checkout is still named"
grep -qF "\"$python\" \"$root/tests/preload/run_preload_test.py\" \"$build/tests/preload/preload_probe\"" "$tests" ||
  fail "preload_shim does not run this checkout's script under $python on this build's probe"
grep -qF "\"$(command -v cmake)\" \"-P\" \"$root/tests/gpu/check_no_cuda_link.cmake\"" "$tests" ||
  fail "no_cuda_link does not run this machine's cmake"
[[ "$(readlink "$build/src/libdelta.so")" == libdelta.so.0 ]] || fail "libdelta.so link not made"
[[ "$(readlink "$build/src/libdelta.so.0")" == libdelta.so.0.1.0 ]] || fail "libdelta.so.0 link not made"
for stub in /usr/local/cuda/lib64/stubs/libcuda.so /usr/local/cuda/targets/*/lib/stubs/libcuda.so; do
  if [[ -e "$stub" ]]; then
    [[ -e "$build/tests/gpu/stub_driver/libcuda.so.1" ]] || fail "the stub driver link still resolves nowhere"
    break
  fi
done
# A second pass changes nothing.
before="$(cat "$tests")"
again="$("$root/scripts/gpu-check" --skip-build --build-dir "$build" --python python3 --stage build)"
[[ "$(cat "$tests")" == "$before" && "$again" != *moving* ]] || fail "a second pass moved the build again"
# --only names stages; a name it does not know stops the run before anything starts.
if refusal="$("$root/scripts/gpu-check" --skip-build --build-dir "$build" --only "run lern" 2>&1)"; then
  fail "--only accepted an unknown stage"
fi
[[ "$refusal" == *"unknown stage 'lern'"* ]] || fail "--only's refusal does not name the stage: $refusal"
echo "gpu-check moved the carried build"
