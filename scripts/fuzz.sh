#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for a bounded time, one after the other, single process.
#
#   scripts/fuzz.sh [seconds-per-target] [target...]     (default: 60 s, every target)
#
# Each target starts from its committed seeds (fuzz/seeds/<target>) and the local corpus
# (fuzz/corpus/<target>, git-ignored, where new inputs go). A crash leaves its input in
# fuzz/artifacts/<target>/ and fails the script; reproduce it with
#   cargo +nightly fuzz run -O <target> fuzz/artifacts/<target>/<file>
# Needs the nightly toolchain (cargo-fuzz builds with sanitizers); cargo-fuzz is installed
# with `cargo install --locked cargo-fuzz` when missing. Without nightly the run is skipped
# loudly and the script exits 3 (0 = all targets ran clean, 1 = a crash or build failure).
#
# Environment:
#   FUZZ_RSS_LIMIT_MB     libFuzzer -rss_limit_mb (default 4096: ASan quarantine and allocator caches
#                         reach ~1 GB on the kernel targets within minutes)
#   FUZZ_MALLOC_LIMIT_MB  libFuzzer -malloc_limit_mb: any single allocation above it is a crash
#                         (default 256; the targets' inputs and models are tiny, so a bigger
#                         allocation means a size taken from the input before validation)
set -uo pipefail

cargo_home=${CARGO_HOME:-$HOME/.cargo}
if [ -d "$cargo_home/bin" ]; then
    PATH="$cargo_home/bin:$PATH"
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root/fuzz"

seconds=${1:-60}
shift $(($# > 0 ? 1 : 0))
rss_limit=${FUZZ_RSS_LIMIT_MB:-4096}
malloc_limit=${FUZZ_MALLOC_LIMIT_MB:-256}

loud() {
    printf '\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n'
    printf '!!! %s\n' "$@"
    printf '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\n'
}

if ! cargo +nightly --version >/dev/null 2>&1; then
    loud "FUZZING SKIPPED: the nightly toolchain is not installed (cargo-fuzz needs it)." \
        "Install it with: rustup toolchain install nightly   (needs network)"
    exit 3
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "cargo-fuzz missing: cargo install --locked cargo-fuzz"
    if ! cargo install --locked cargo-fuzz; then
        loud "FUZZING SKIPPED: cargo-fuzz is missing and could not be installed (offline?)."
        exit 3
    fi
fi

if [ $# -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo +nightly fuzz list)
fi

echo "building ${#targets[@]} fuzz targets (release, debug assertions, AddressSanitizer)"
cargo +nightly fuzz build -O || exit 1

summary=()
status=0
for target in "${targets[@]}"; do
    mkdir -p "corpus/$target" "seeds/$target"
    printf '\n=== fuzz %s for %ss ===\n' "$target" "$seconds"
    out=$(mktemp -t "tessel-fuzz-$target.XXXXXX")
    start=$(date +%s)
    timeout --kill-after=30s $((seconds + 120)) \
        cargo +nightly fuzz run -O "$target" "corpus/$target" "seeds/$target" -- \
        -max_total_time="$seconds" -rss_limit_mb="$rss_limit" \
        -malloc_limit_mb="$malloc_limit" -print_final_stats=1 2>&1 |
        tee "$out" | grep -vE '^#[0-9]+\s+(NEW|REDUCE|pulse)|NEW_FUNC|^\s*$'
    result=${PIPESTATUS[0]}
    execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$out" | tail -1)
    rm -f "$out"
    verdict=ok
    if [ "$result" -eq 124 ] || [ "$result" -eq 137 ]; then
        # `timeout` stopped it: the build before the run (a cold target dir) ate the margin.
        verdict="STOPPED by the time limit (no crash; rerun with a built target dir)"
        status=1
    elif [ "$result" -ne 0 ]; then
        verdict="CRASH (see fuzz/artifacts/$target)"
        status=1
    fi
    summary+=("$(printf '%-14s %-40s %12s execs %6ss' "$target" "$verdict" "${execs:-?}" \
        $(($(date +%s) - start)))")
done

printf '\n=== fuzz summary (%ss per target) ===\n' "$seconds"
printf '%s\n' "${summary[@]}"
exit "$status"
