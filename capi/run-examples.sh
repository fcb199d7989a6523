#!/usr/bin/env bash
# Builds libtessel (static and shared, with the test profile's crates), compiles the C and C++ examples of
# capi/examples/ against each with gcc/g++ -Wall -Wextra -Werror, runs them on the numbers
# model (embedded, and assets/numbers) and on test fixtures (the NLLB model of tests/decoding,
# the Whisper model and speech clip of tests/transcribe), and runs them once more under
# Valgrind (zero leaks, zero errors). Called by scripts/test.sh; run it alone from anywhere:
# capi/run-examples.sh
#
# Environment:
#   CI           when "true", missing gcc/g++/valgrind is a failure instead of a loud skip
#   CARGO_TARGET_DIR  honoured
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
target_dir=${CARGO_TARGET_DIR:-$root/target}
# The test profile (optimised, debug assertions and overflow checks on) and `--workspace`
# feature resolution: the library is linked from the crates the workspace tests built, where
# a release build of its own would compile every crate again (minutes on 2 cores).
lib=$target_dir/debug
out=$target_dir/capi-examples
tsv=assets/numbers/pytorch_greedy.tsv
nllb=tests/decoding/nllb/hf
whisper=tests/transcribe/tiny_en_32/model
clip=tests/transcribe/clip.wav
line="Hello world"
# The Python pipeline's translation of $line (tests/decoding/nllb/expected.json), when jq is
# there to read it; without jq translate.c only prints it (capi/tests/suite/translate.rs checks it).
expected=()
if command -v jq >/dev/null; then
    expected=("$(jq -r --arg t "$line" '.pipeline[] | select(.text == $t) | .output' \
        tests/decoding/nllb/expected.json)")
fi

loud() {
    printf '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n'
    printf '!!! %s\n' "$@"
    printf '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n'
}

for tool in gcc g++; do
    if ! command -v "$tool" >/dev/null; then
        loud "C API EXAMPLES SKIPPED: $tool is missing (apt-get install gcc g++)."
        [ "${CI:-}" = true ] && exit 1
        exit 0
    fi
done

echo "--- building libtessel (static and shared, the test profile)"
# PYO3_BUILD_EXTENSION_MODULE: the workspace's Python extension builds as a module, which
# leaves libpython to the interpreter that loads it (as the Python step builds it).
PYO3_BUILD_EXTENSION_MODULE=1 cargo build --locked --workspace --lib --profile test

mkdir -p "$out"
warn=(-Wall -Wextra -Werror -O2 -g)
# What the static library needs besides libc (rustc --print native-static-libs).
static_libs=(-lpthread -ldl -lm -lrt -lutil -lgcc_s)

# The shared builds take their flags from capi/tessel.pc.in, filled in for this tree.
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
sed -e "s|@INCLUDEDIR@|$root/capi/include|" -e "s|@LIBDIR@|$lib|" -e "s|@VERSION@|$version|" \
    capi/tessel.pc.in >"$out/tessel.pc"
if command -v pkg-config >/dev/null; then
    read -r -a shared_flags < <(PKG_CONFIG_PATH=$out pkg-config --cflags --libs tessel)
    echo "pkg-config tessel: ${shared_flags[*]}"
else
    echo "pkg-config is missing: the shared builds use the flags of tessel.pc by hand"
    shared_flags=(-I"$root/capi/include" -L"$lib" -ltessel)
fi

build() {
    local compiler=$1 std=$2 src=$3 name=$4
    "$compiler" "$std" "${warn[@]}" -Icapi/include "$src" "$lib/libtessel.a" "${static_libs[@]}" \
        -o "$out/$name-static"
    "$compiler" "$std" "${warn[@]}" "$src" "${shared_flags[@]}" -Wl,-rpath,"$lib" \
        -o "$out/$name-shared"
    echo "built $name-static and $name-shared"
}

echo "--- compiling the examples (-Wall -Wextra -Werror)"
build gcc -std=c11 capi/examples/numbers.c numbers
build gcc -std=c11 capi/examples/threads.c threads
build gcc -std=c11 capi/examples/batch.c batch
build gcc -std=c11 capi/examples/translate.c translate
build gcc -std=c11 capi/examples/transcribe.c transcribe
build g++ -std=c++17 capi/examples/numbers.cpp numbers_cpp
build g++ -std=c++17 capi/examples/tasks.cpp tasks_cpp
# The header alone compiles as C++ too (extern "C" guards).
g++ -std=c++17 "${warn[@]}" -x c++ -fsyntax-only capi/include/tessel.h

for kind in static shared; do
    echo "--- running the examples ($kind library)"
    "$out/numbers-$kind" embedded "$tsv" 1
    "$out/numbers-$kind" assets/numbers "$tsv" 7
    "$out/threads-$kind" "$tsv" 4
    "$out/batch-$kind" assets/numbers
    "$out/numbers_cpp-$kind" "$tsv" 9
    "$out/translate-$kind" "$nllb" eng_Latn fra_Latn "$line" "${expected[@]}"
    "$out/transcribe-$kind" "$whisper" "$clip" words batched
    "$out/tasks_cpp-$kind" "$nllb" eng_Latn fra_Latn "$line" "$whisper" "$clip"
done

if ! command -v valgrind >/dev/null; then
    loud "VALGRIND SKIPPED: valgrind is missing (apt-get install valgrind);" \
        "the examples ran, but leaks and memory errors were NOT checked."
    [ "${CI:-}" = true ] && exit 1
    exit 0
fi
echo "--- the examples under Valgrind (static library; every leak kind and error fails)"
# capi/valgrind.supp names the one dependency's process-lifetime statics it suppresses.
vg=(valgrind --quiet --error-exitcode=99 --leak-check=full --num-callers=40
    --suppressions=capi/valgrind.supp --show-leak-kinds=definite,indirect,possible
    --errors-for-leak-kinds=definite,indirect,possible)
"${vg[@]}" "$out/numbers-static" embedded "$tsv" 200
"${vg[@]}" "$out/threads-static" "$tsv" 800
"${vg[@]}" "$out/batch-static" assets/numbers
"${vg[@]}" "$out/numbers_cpp-static" "$tsv" 400
"${vg[@]}" "$out/translate-static" "$nllb" eng_Latn fra_Latn "$line" "${expected[@]}"
# Without `batched`: its one more 30 s window is checked natively above (Valgrind time).
"${vg[@]}" "$out/transcribe-static" "$whisper" "$clip" words
"${vg[@]}" "$out/tasks_cpp-static" "$nllb" eng_Latn fra_Latn "$line" "$whisper" "$clip"
echo "C API examples: built against the static and shared library, ran, and Valgrind found no leak or error"
