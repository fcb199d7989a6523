#!/usr/bin/env bash
# The C API's call overhead on the numbers model: capi/bench/bench.c (through libtessel.a)
# and capi/examples/bench_rust.rs (tessel-model directly) do the same work; they run
# alternately, RUNS times each, on the same core, and the ratios C time / Rust time of the
# median of their medians and of their minima are printed (1.00: no overhead; on a shared,
# loaded machine the minimum is the least disturbed figure). Not part of the test command.
#
#   capi/bench/run.sh [RUNS] [LINES] [ROUNDS]      defaults: 7 16 200
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
runs=${1:-7} lines=${2:-16} rounds=${3:-200}
target_dir=${CARGO_TARGET_DIR:-$root/target}
out=$target_dir/capi-examples
tsv=assets/numbers/pytorch_greedy.tsv

cargo build --locked --release -p tessel-capi --lib --example bench_rust
mkdir -p "$out"
gcc -std=c11 -Wall -Wextra -Werror -O2 -Icapi/include capi/bench/bench.c \
    "$target_dir/release/libtessel.a" -lpthread -ldl -lm -lrt -lutil -lgcc_s -o "$out/bench-c"
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
echo "CPU: $cpu; ISA: ${TESSEL_ISA:-best}; $runs alternating runs of $rounds rounds over $lines lines"
pin=()
command -v taskset >/dev/null && pin=(taskset -c 0)
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for _ in $(seq "$runs"); do
    "${pin[@]}" "$out/bench-c" "$tsv" "$lines" "$rounds" | tee -a "$results"
    "${pin[@]}" "$target_dir/release/examples/bench_rust" "$tsv" "$lines" "$rounds" | tee -a "$results"
done
awk '
    function median(a, n,   i, j, t) {
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function min(a, n,   i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] < m) m = a[i]; return m }
    $1 == "c"    { cr[++nc] = $3; cd[nc] = $5; cmr[nc] = $7; cmd[nc] = $8 }
    $1 == "rust" { rr[++nr] = $3; rd[nr] = $5; rmr[nr] = $7; rmd[nr] = $8 }
    END {
        a = median(cr, nc); b = median(rr, nr); c = median(cd, nc); d = median(rd, nr)
        printf "median  read (text in, digits out): C %.0f, Rust %.0f ns/token, C/Rust %.3f\n", a, b, a / b
        printf "median  decode step loop:          C %.0f, Rust %.0f ns/step,  C/Rust %.3f\n", c, d, c / d
        a = min(cmr, nc); b = min(rmr, nr); c = min(cmd, nc); d = min(rmd, nr)
        printf "minimum read (text in, digits out): C %.0f, Rust %.0f ns/token, C/Rust %.3f\n", a, b, a / b
        printf "minimum decode step loop:          C %.0f, Rust %.0f ns/step,  C/Rust %.3f\n", c, d, c / d
    }' "$results"
