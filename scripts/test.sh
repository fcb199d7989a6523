#!/usr/bin/env bash
# THE tessel test command. Run from anywhere: scripts/test.sh
#
# Sets up what it needs, then checks, in order:
#   1. formatting (cargo fmt --check) and lints (cargo clippy -D warnings), workspace and nostd-check;
#   2. the workspace tests once per ISA level this CPU runs (TESSEL_ISA=scalar, avx2, avx512),
#      and the doc tests once;
#   3. that tessel-kernels and the tessel-model core build and run a real model with neither std
#      nor alloc (nostd-check/), and the
#      C API examples (capi/run-examples.sh: C and C++ against the static and shared library,
#      built on the test build's crates, once under Valgrind), and the Python package (a wheel
#      built by maturin on the same crates, installed into a venv with Ray Data, pytest
#      python/tests);
#   4. the kernel and integration tests at TESSEL_ISA=neon, cross-built for aarch64 with Debian's
#      Rust and run under qemu-user (the toolchain is installed when missing; where it cannot be,
#      the step is skipped loudly, except under CI=true where that is a failure);
#   5. a short bounded pass over every cargo-fuzz target (scripts/fuzz.sh, FUZZ_SECONDS each)
#      and Miri over the scalar kernels (both need nightly: skipped loudly when it is missing).
# Every step runs even after an earlier one failed; the exit status is non-zero if any failed.
#
# Environment:
#   NEON_PROPTEST_CASES  proptest cases per property under qemu (default 16; qemu is 10-50x slower)
#   PROPTEST_CASES       passed through to the x86-64 test runs when set
#   CI                   when "true", a NEON toolchain that cannot be installed is a failure
#   FUZZ_SECONDS         seconds per fuzz target in step 5 (default 5; eighteen targets)
set -uo pipefail

# rustup's cargo, never Debian's /usr/bin/cargo (installed for the NEON step), for x86-64.
cargo_home=${CARGO_HOME:-$HOME/.cargo}
if [ -d "$cargo_home/bin" ]; then
    PATH="$cargo_home/bin:$PATH"
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

# Honour CARGO_TARGET_DIR; the no-std and aarch64 builds get their own directories inside it.
target_dir=${CARGO_TARGET_DIR:-$root/target}
neon_target=aarch64-unknown-linux-gnu
neon_cases=${NEON_PROPTEST_CASES:-16}
# Guards against a hung test eating CI's 90 minutes: one x86-64 level's test run (built
# beforehand), and the NEON step including its aarch64 build (qemu runs 10-50x slower).
x86_level_timeout=20m
neon_timeout=40m
log=$(mktemp -t tessel-test.XXXXXX)
neon_install_log=$(mktemp -t tessel-neon-install.XXXXXX)
levels_file=$(mktemp -t tessel-levels.XXXXXX)
trap 'rm -f "$log" "$neon_install_log" "$levels_file"' EXIT

step_names=()
step_results=()
step_seconds=()
failures=0
neon_status="not run"
levels=()

banner() { printf '\n=== %s === (%s free)\n' "$*" "$(free_space)"; }

free_space() { df -h --output=avail "$root" 2>/dev/null | tail -n 1 | tr -d ' '; }

# Under CI=true, deletes build output that no later step reads: CI machines have had a few GB
# of disk, and the x86-64 tests, the aarch64 tests and the fuzz build take several each.
free_for_later_steps() {
    if [ "${CI:-}" = true ]; then
        echo "CI: deleting $* (no later step reads them)"
        rm -rf "$@"
    fi
}

loud() {
    printf '\n'
    printf '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n'
    printf '!!! %s\n' "$@"
    printf '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\n'
}

# step NAME COMMAND...: runs COMMAND, tees its output into the log, records result and time.
step() {
    local name=$1 start status
    shift
    banner "$name"
    start=$(date +%s)
    "$@" 2>&1 | tee -a "$log"
    status=${PIPESTATUS[0]}
    record "$name" "$([ "$status" -eq 0 ] && echo ok || echo FAILED)" $(($(date +%s) - start))
    return "$status"
}

record() {
    step_names+=("$1")
    step_results+=("$2")
    step_seconds+=("$3")
    if [ "$2" = FAILED ]; then
        failures=$((failures + 1))
    fi
}

# --- set-up -----------------------------------------------------------------------------------

ensure_rust_components() {
    if cargo fmt --version >/dev/null 2>&1 && cargo clippy --version >/dev/null 2>&1; then
        return 0
    fi
    echo "rustfmt or clippy missing from the rustup toolchain: trying rustup component add"
    rustup component add rustfmt clippy
}

# The aarch64 toolchain is a ~300 MB download: start it now, in the background, so it overlaps
# the x86-64 build; the NEON step waits for it.
neon_install_pid=
if [ -x scripts/neon-toolchain.sh ]; then
    scripts/neon-toolchain.sh >"$neon_install_log" 2>&1 &
    neon_install_pid=$!
fi

step "set-up: rustfmt and clippy" ensure_rust_components

# --- formatting and lints -------------------------------------------------------------------

nostd_manifest=(--manifest-path nostd-check/Cargo.toml --target-dir "$target_dir/nostd-check")

seed_nostd_lock() {
    # nostd-check is its own workspace: start its lock from the workspace's so it resolves the
    # same versions of tessel-kernels' dependencies (cargo prunes what it does not use).
    cp Cargo.lock nostd-check/Cargo.lock
}

fmt_check() {
    cargo fmt --all -- --check &&
        cargo fmt --manifest-path nostd-check/Cargo.toml -- --check
}

clippy_check() {
    seed_nostd_lock &&
        cargo clippy --locked --workspace --all-targets -- -D warnings &&
        cargo clippy "${nostd_manifest[@]}" -- -D warnings
}

step "cargo fmt --check" fmt_check
step "cargo clippy -D warnings" clippy_check

# --- x86-64 tests, once per ISA level -------------------------------------------------------

detect_levels() {
    # The test build made debug/isa (bench's integration test runs it), with the same features
    # as the tests; `cargo run` would resolve features apart and rebuild dependencies.
    if [ -x "$target_dir/debug/isa" ]; then
        "$target_dir/debug/isa" >"$levels_file" || return 1
    else
        cargo run --locked --profile test -p tessel-bench --bin isa >"$levels_file" || return 1
    fi
    echo "ISA levels this CPU runs: $(tr '\n' ' ' <"$levels_file")"
}

build_tests() {
    cargo test --locked --workspace --lib --bins --tests --no-run
}

# The published-layout rows (tests/tests/published.rs) prove loaders, not kernels: every kernel
# is proven at every level by its proptests and the family goldens. The scalar level takes only
# the rows of at most 50 M values, and not their CTranslate2 conversions; the other levels take
# them all. A row's generated weights
# (up to 1.3 GB) are deleted once it is checked, but for the rows the NEON step reads.
neon_published_rows=t5-small,opus-mt-en-de
run_tests_at() {
    local published_max= published_ct2=1
    if [ "$1" = scalar ]; then
        published_max=50000000 published_ct2=0
    fi
    TESSEL_ISA=$1 TESSEL_PUBLISHED_MAX_VALUES=${published_max:-} TESSEL_PUBLISHED_CT2=$published_ct2 \
        TESSEL_PUBLISHED_KEEP=$neon_published_rows \
        timeout --kill-after=30s "$x86_level_timeout" \
        cargo test --locked --no-fail-fast --workspace --lib --bins --tests
}

if step "build the workspace tests" build_tests && step "detect the ISA levels" detect_levels; then
    mapfile -t levels <"$levels_file"
    for level in "${levels[@]}"; do
        step "tests at ISA level $level" run_tests_at "$level"
    done
fi
step "doc tests" cargo test --locked --workspace --doc

# --- no_std, no alloc -------------------------------------------------------------------------

nostd_check() {
    seed_nostd_lock &&
        cargo build --release "${nostd_manifest[@]}" &&
        "$target_dir/nostd-check/release/tessel-nostd-check" &&
        echo "tessel-kernels and the tessel-model core link without std or alloc; kernels and the numbers model ran correctly at every level"
}

step "no_std and no alloc: nostd-check" nostd_check

# --- the C API: examples in C and C++ against libtessel, and under Valgrind ------------------

# capi/run-examples.sh builds the static and shared library (release), compiles the examples
# with -Wall -Wextra -Werror, runs them, and runs them once under Valgrind. A missing compiler
# or Valgrind is a loud skip (exit 0), a failure under CI=true.
step "C API: examples against libtessel.a and libtessel.so, Valgrind" capi/run-examples.sh

# --- the Python package -----------------------------------------------------------------------

# The wheel, built by maturin in the test build's profile (`dev` and `test` are one profile in
# Cargo.toml, so their artifacts are shared; maturin resolves tessel-python's features alone,
# so the crates whose features differ compile again: about 2 minutes in a clean tree on 2
# cores, where `pip install ./python`'s release build takes about 4), installed into a venv in
# the target directory (fresh under CI), and the pytest suite run there. Its references are the
# committed fixtures; Ray Data runs the scale-out recipe on a local two-CPU cluster (about 50 s
# to install, 30 s to run). The CTranslate2 comparisons skip without ctranslate2 (the fixtures
# hold its outputs).
ray_version=2.60.0
maturin_version=1.16.0
python_tests() {
    local venv="$target_dir/python-venv" wheels="$target_dir/wheels"
    local quiet=(--quiet --disable-pip-version-check)
    rm -rf "$wheels" &&
        { [ -x "$venv/bin/python" ] || python3 -m venv "$venv"; } &&
        "$venv/bin/pip" install "${quiet[@]}" pytest numpy "ray[data]==$ray_version" \
            "maturin==$maturin_version" &&
        "$venv/bin/maturin" build --locked --profile dev -m python/Cargo.toml -o "$wheels" &&
        "$venv/bin/pip" install "${quiet[@]}" --no-deps --force-reinstall "$wheels"/tessel-*.whl &&
        "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests
}

step "Python package: the wheel (maturin) in a venv, pytest python/tests" python_tests
free_for_later_steps "$target_dir/debug" "$target_dir/nostd-check" "$target_dir/capi-examples" \
    "$target_dir/python-venv" "$target_dir/wheels"

# --- NEON under qemu --------------------------------------------------------------------------

# Under qemu the published-layout step takes two small rows, reading the weights the x86-64
# run generated (the generator is deterministic and the files are the same on both).
neon_tests() {
    RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc \
        CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C target-feature=+crt-static" \
        CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
        CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=qemu-aarch64-static \
        TESSEL_ISA=neon PROPTEST_CASES=$neon_cases \
        TESSEL_PUBLISHED_ROWS=$neon_published_rows TESSEL_PUBLISHED_KEEP=$neon_published_rows \
        TESSEL_PUBLISHED_CACHE="$target_dir/tmp/published" \
        timeout --kill-after=30s "$neon_timeout" \
        /usr/bin/cargo test --locked --target "$neon_target" --target-dir "$target_dir/aarch64" \
        -p tessel-kernels -p tessel-tests --lib --tests
}

banner "NEON toolchain (Debian rustc-web + aarch64 std + qemu-user)"
neon_install_start=$(date +%s)
neon_ready=false
if [ -n "$neon_install_pid" ] && wait "$neon_install_pid"; then
    neon_ready=true
fi
cat "$neon_install_log"
record "NEON toolchain install/check" \
    "$($neon_ready && echo ok || echo skipped)" $(($(date +%s) - neon_install_start))

if $neon_ready; then
    if step "tests at ISA level neon (aarch64 under qemu, PROPTEST_CASES=$neon_cases)" neon_tests; then
        neon_status="ran: tessel-kernels and tessel-tests at TESSEL_ISA=neon under qemu-aarch64"
    else
        neon_status="FAILED"
    fi
elif [ "${CI:-}" = true ]; then
    loud "NEON: the aarch64 toolchain could not be installed, and CI requires it." \
        "See the install output above."
    record "tests at ISA level neon" FAILED 0
    neon_status="FAILED: toolchain could not be installed"
else
    loud "NEON TESTS SKIPPED: the aarch64 cross toolchain is missing and cannot be installed" \
        "here (installing needs root and apt-get). The NEON code paths were NOT tested." \
        "Run as root, or install what scripts/neon-toolchain.sh lists, to test them."
    neon_status="SKIPPED (toolchain missing, not installable here)"
fi

free_for_later_steps "$target_dir/aarch64" "$target_dir/tmp"

# --- fuzzing and Miri (nightly) ---------------------------------------------------------------

# A short bounded pass over every cargo-fuzz target (scripts/fuzz.sh; the long run is documented
# in fuzz/README.md). Exit 3 from fuzz.sh means nightly or cargo-fuzz is missing: a loud skip.
fuzz_seconds=${FUZZ_SECONDS:-5}
banner "fuzz: every target for ${fuzz_seconds}s (scripts/fuzz.sh)"
fuzz_start=$(date +%s)
scripts/fuzz.sh "$fuzz_seconds" 2>&1 | tee -a "$log"
case ${PIPESTATUS[0]} in
    0) record "fuzz: every target for ${fuzz_seconds}s" ok $(($(date +%s) - fuzz_start)) ;;
    3) record "fuzz: every target for ${fuzz_seconds}s" skipped $(($(date +%s) - fuzz_start)) ;;
    *) record "fuzz: every target for ${fuzz_seconds}s" FAILED $(($(date +%s) - fuzz_start)) ;;
esac
free_for_later_steps fuzz/target

# Miri over the kernels at the scalar level: the harness in fuzz/miri (every kernel, awkward
# shapes) and the kernel unit tests that do not detect the CPU (Miri cannot run CPUID).
miri_ready() {
    cargo +nightly --version >/dev/null 2>&1 || return 1
    cargo +nightly miri --version >/dev/null 2>&1 ||
        rustup component add --toolchain nightly miri rust-src >/dev/null 2>&1
}

miri_tests() {
    cargo +nightly miri test --manifest-path fuzz/miri/Cargo.toml &&
        TESSEL_ISA=scalar cargo +nightly miri test -p tessel-kernels --lib \
            --target-dir "$target_dir/miri" -- \
            attention::band error:: gemm:: scratch:: isa::tests::names_round_trip
}

if miri_ready; then
    step "Miri: scalar kernels (fuzz/miri) and CPU-independent kernel unit tests" miri_tests
else
    loud "MIRI SKIPPED: nightly or its miri component is missing and cannot be installed here." \
        "Install: rustup toolchain install nightly && rustup +nightly component add miri rust-src"
    record "Miri" skipped 0
fi

# --- summary ----------------------------------------------------------------------------------

banner "summary"
total=0
for i in "${!step_names[@]}"; do
    printf '%-70s %-8s %5ss\n' "${step_names[$i]}" "${step_results[$i]}" "${step_seconds[$i]}"
    total=$((total + step_seconds[i]))
done
printf '%-70s %-8s %5ss\n' "total" "" "$total"
echo "x86-64 ISA levels tested: ${levels[*]:-none}"
echo "NEON: $neon_status"
read -r passed failed < <(
    grep -E '^test result: ' "$log" |
        sed -E 's/.* ([0-9]+) passed; ([0-9]+) failed.*/\1 \2/' |
        awk '{ p += $1; f += $2 } END { print p + 0, f + 0 }'
)
if [ "$failures" -gt 0 ]; then
    echo "$failures step(s) FAILED"
fi
echo "tests: $passed passed, $failed failed"
[ "$failures" -eq 0 ]
