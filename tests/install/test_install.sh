#!/usr/bin/env bash
# `cmake --install` as a user runs it: every file where packaging/CMakeLists.txt says; a small
# C++ program built against the installed package, through find_package(delta) and through
# pkg-config, run on the simulated GPU; and the installed deltactl, moved elsewhere with its
# tree, importing an Execution Trace with its own copy of the Python tools.
#   test_install.sh BUILD_DIR SOURCE_DIR TRACES_DIR
set -euo pipefail
build="$1"
source="$2"
traces="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
libdir=lib
[[ -d "$tmp/prefix/lib" ]] || libdir=$(cd "$tmp/prefix" && ls -d lib*/ | head -1)
for file in "$libdir/libdelta.so" include/delta/delta.h "$libdir/cmake/delta/deltaConfig.cmake" \
            "$libdir/cmake/delta/deltaConfigVersion.cmake" "$libdir/pkgconfig/delta.pc" bin/deltactl \
            share/delta/tools/importers/to_trace.py share/delta/tools/viewers/report.py share/delta/tools/plots/frontier.py; do
  [[ -e "$tmp/prefix/$file" ]] || fail "not installed: $file"
done
# The C ABI only: the C++ headers describe symbols libdelta.so does not export.
[[ ! -e "$tmp/prefix/include/delta/trace.hpp" ]] || fail "a C++ header was installed"

# The installed tree is moved: nothing in it may point back to where it was installed.
mv "$tmp/prefix" "$tmp/moved"
prefix="$tmp/moved"
export DELTA_DEVICE=sim DELTA_LOG_LEVEL=error

cmake -S "$source/tests/install/consumer" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/cmake" >/dev/null
LD_LIBRARY_PATH="$prefix/$libdir" "$tmp/cmake/consumer" | grep -q 'allocated and freed 1 MiB' || fail "find_package consumer"

flags=$(PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" pkg-config --cflags --libs delta) || fail "pkg-config delta"
# shellcheck disable=SC2086
c++ -std=c++17 "$source/tests/install/consumer/consumer.cpp" $flags -o "$tmp/pc-consumer"
LD_LIBRARY_PATH="$prefix/$libdir" "$tmp/pc-consumer" | grep -q 'allocated and freed 1 MiB' || fail "pkg-config consumer"

# deltactl's Python tools: the installed copy, beside it, whatever tree it was built from. A
# DELTA_PYTHON that notes each script it is given shows which copy ran.
cat >"$tmp/python" <<PY
#!/bin/sh
echo "\$1" >>"$tmp/scripts-run"
exec python3 "\$@"
PY
chmod +x "$tmp/python"
DELTA_PYTHON="$tmp/python" "$prefix/bin/deltactl" trace info "$traces/resnet18_bs128_et.json.gz" >"$tmp/info"
grep -q '^ops: *[1-9]' "$tmp/info" || fail "installed deltactl: trace info of an Execution Trace"
grep -qx "$prefix/share/delta/tools/importers/to_trace.py" "$tmp/scripts-run" ||
  fail "installed deltactl ran $(cat "$tmp/scripts-run"), not its own copy"
echo "install: headers, library, CMake package, pkg-config and deltactl's tools in place"
