#!/usr/bin/env bash
# Runs the Corstone-300 firmwares on QEMU's mps3-an547 (a Cortex-M55; QEMU models no Ethos-U):
#  1. digits-qemu: the digits model on the CPU kernels over the 360 held-out images; its
#     predictions must equal the host's (`cargo run -p digits -- --predictions`, the virtual
#     NPU), and it must exit 0 (every output bit-exact with TFLite's, NPU path failing cleanly);
#  2. firmware-corstone300: the NPU firmware must stop with "no Ethos-U answered" and exit 1.
# Usage: examples/firmware-corstone300/qemu.sh   (from anywhere; needs qemu-system-arm)
set -euo pipefail
cd "$(dirname "$0")/../.."
target=thumbv8m.main-none-eabihf
bin="${CARGO_TARGET_DIR:-target}/$target/release"
qemu=(qemu-system-arm -M mps3-an547 -nographic -icount shift=0
      -semihosting-config enable=on,target=native)

cargo build --release -p firmware-corstone300 --target "$target"

echo "== digits-qemu on ${qemu[*]}"
set +e
out=$(timeout 600 "${qemu[@]}" -kernel "$bin/digits-qemu" 2>&1 | tr -d '\r')
status=$?
set -e
echo "$out"
if [ "$status" -ne 0 ]; then
    echo "digits-qemu: exit status $status" >&2
    exit 1
fi
device=$(grep '^predictions: ' <<<"$out" || true)
host=$(cargo run -q -p digits -- --predictions)
if [ -z "$device" ] || [ "$device" != "$host" ]; then
    echo "digits-qemu: the predictions differ from the host's:" >&2
    echo "  qemu: $device" >&2
    echo "  host: $host" >&2
    exit 1
fi
echo "digits-qemu: all $(( ${#device} - 13 )) predictions equal the host's (virtual NPU)"

echo "== firmware-corstone300 (the NPU firmware) on the same machine"
set +e
out=$(timeout 60 "${qemu[@]}" -kernel "$bin/firmware-corstone300" 2>&1 | tr -d '\r')
status=$?
set -e
echo "$out"
if [ "$status" -ne 1 ] || ! grep -q "no Ethos-U answered at 0x58102000" <<<"$out"; then
    echo "firmware-corstone300: expected the no-NPU error and exit status 1, got $status" >&2
    exit 1
fi
echo "firmware-corstone300: failed cleanly with exit status 1, as it must without an NPU"
