#!/usr/bin/env bash
# Flash that npu-rt's Ethos-U driver adds to this firmware, measured from the ELF.
#
# Builds the firmware four times for thumbv8m.main-none-eabihf: with the driver and its PMU
# report (`driver`, the default), with the PMU counters printed as event numbers instead of
# names (`pmu-numbers`), with the driver but no PMU (`no-pmu`), and with an NPU whose `run`
# does nothing (`noop-npu`). Prints the flash of each (.vector_table + .text + .rodata +
# .data's load image; the model's command stream and weights in .npu_rom are the same in all
# and shown apart), the differences, the npu_rt symbols that survive in the driver build, and
# whether anything from an allocator is linked.
#
# Usage: examples/firmware-corstone300/measure.sh [opt-level ...]   (default: 3 s z; 3 is the
# workspace's release profile, s and z override it through CARGO_PROFILE_RELEASE_OPT_LEVEL)
set -euo pipefail
cd "$(dirname "$0")/../.."

TARGET=thumbv8m.main-none-eabihf
PKG=firmware-corstone300
TDIR=${CARGO_TARGET_DIR:-target}
OUT=$TDIR/$TARGET/release/$PKG
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

pick() { for t in "$@"; do command -v "$t" >/dev/null && { echo "$t"; return; }; done; echo "none of: $*" >&2; exit 1; }
READELF=$(pick llvm-readelf arm-none-eabi-readelf readelf)
NM=$(pick llvm-nm arm-none-eabi-nm)

# Bytes of the named sections of an ELF (hex sizes from the section table).
section_bytes() {
    local elf=$1; shift
    local total=0 size
    for s in "$@"; do
        size=$("$READELF" -SW "$elf" | awk -v s="$s" '{ for (i = 1; i <= NF; i++) if ($i == s) { print $(i + 4); exit } }')
        total=$((total + 0x${size:-0}))
    done
    echo "$total"
}

flash() { section_bytes "$1" .vector_table .text .rodata .data; }

levels=("$@")
[ ${#levels[@]} -eq 0 ] && levels=(3 s z)

for level in "${levels[@]}"; do
    for variant in driver pmu-numbers no-pmu noop; do
        features=()
        [ "$variant" = pmu-numbers ] && features=(--features pmu-numbers)
        [ "$variant" = no-pmu ] && features=(--features no-pmu)
        [ "$variant" = noop ] && features=(--features noop-npu)
        CARGO_PROFILE_RELEASE_OPT_LEVEL=$level \
            cargo build --quiet --release -p "$PKG" --bin "$PKG" --target "$TARGET" "${features[@]}"
        cp "$OUT" "$WORK/$variant-$level.elf"
    done
    d=$WORK/driver-$level.elf
    u=$WORK/pmu-numbers-$level.elf
    p=$WORK/no-pmu-$level.elf
    n=$WORK/noop-$level.elf
    echo "== opt-level $level"
    printf '  %-44s %6s %6s %6s %6s %6s\n' "" .text .rodata flash .npu_rom .bss
    for v in driver pmu-numbers no-pmu noop; do
        e=$WORK/$v-$level.elf
        printf '  %-44s %6d %6d %6d %6d %6d\n' "$v" \
            "$(section_bytes "$e" .text)" "$(section_bytes "$e" .rodata)" "$(flash "$e")" \
            "$(section_bytes "$e" .npu_rom)" "$(section_bytes "$e" .bss)"
    done
    echo "  flash added (.vector_table + .text + .rodata + .data):"
    echo "    driver without PMU (no-pmu - noop):          $(( $(flash "$p") - $(flash "$n") )) bytes"
    echo "    driver with PMU, numbers (pmu-numbers - noop): $(( $(flash "$u") - $(flash "$n") )) bytes"
    echo "    driver with PMU report (driver - noop):      $(( $(flash "$d") - $(flash "$n") )) bytes"
    echo "    of which PMU event names (driver - pmu-numbers): $(( $(flash "$d") - $(flash "$u") )) bytes"
    echo "  npu_rt symbols left in the driver build (the rest is inlined into main):"
    "$NM" -S -C --size-sort "$d" | awk '$3 ~ /^[tTrR]$/' | grep 'npu_rt' \
        | awk '{ printf "    %6d %s", ("0x" $2) + 0, $3; for (i = 4; i <= NF; i++) printf " %s", $i; print "" }' \
        | sed -E 's/::h[0-9a-f]{16}$//' || true
    alloc=$("$NM" -C "$d" | grep -Ei '__rust_alloc|__rg_alloc|__rdl_alloc|alloc::alloc|GlobalAlloc|__rust_no_alloc_shim' || true)
    if [ -z "$alloc" ]; then
        echo "  heap: no allocator symbol linked (no __rust_alloc, __rg_alloc, GlobalAlloc)"
    else
        echo "  heap: ALLOCATOR SYMBOLS FOUND:"; echo "$alloc" | sed 's/^/    /'
    fi
done
