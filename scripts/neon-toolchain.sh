#!/usr/bin/env bash
# Installs the aarch64 cross toolchain used to run the NEON tests under qemu:
# Debian's own Rust (which ships an aarch64 standard library as a multiarch
# package), the aarch64 C toolchain for linking, and qemu-user.
# Exits 0 when the toolchain is present afterwards, 1 when it cannot be installed.
set -euo pipefail

neon_toolchain_present() {
    [ -x /usr/bin/cargo ] && [ -x /usr/bin/rustc ] &&
        [ -d /usr/lib/rustlib/aarch64-unknown-linux-gnu/lib ] &&
        command -v aarch64-linux-gnu-gcc >/dev/null &&
        command -v qemu-aarch64-static >/dev/null
}

if neon_toolchain_present; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "neon-toolchain: not root or no apt-get: cannot install the aarch64 toolchain" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# Wait for a dpkg lock another apt run holds rather than failing at once.
apt=(apt-get -q -o DPkg::Lock::Timeout=600)
install() {
    "${apt[@]}" update &&
        "${apt[@]}" install -y --no-install-recommends \
            rustc-web cargo-web libstd-rust-web-dev:arm64 \
            gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static
}
dpkg --add-architecture arm64
# One retry: a mirror hiccup should not cost the NEON tests.
install || { sleep 15 && install; }
neon_toolchain_present
