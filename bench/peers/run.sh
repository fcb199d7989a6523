#!/usr/bin/env bash
# tessel vs CTranslate2 on the same CTranslate2 model (see bench/peers/README.md).
#   bench/peers/run.sh              the comparison table
#   bench/peers/run.sh --fixtures   regenerate the tiny test fixtures of tests/ct2/
#   PEER_FILE=1 bench/peers/run.sh  batched decoding of a file of lines (run_file.py)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="$here/.venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -c "import ctranslate2, numpy" 2>/dev/null ||
  "$venv/bin/pip" install --quiet ctranslate2 numpy
if [ "${1:-}" = "--fixtures" ]; then
  exec "$venv/bin/python" "$here/make_fixture.py" "$root/tests/ct2"
fi
(cd "$root" && cargo build --release --quiet -p tessel-bench --bin ct2_peer)
if [ -n "${PEER_FILE:-}" ]; then
  exec "$venv/bin/python" "$here/run_file.py" "$root/target/release/ct2_peer"
fi
exec "$venv/bin/python" "$here/run.py" "$root/target/release/ct2_peer"
