#!/bin/sh
# Renders `npu report --html` of MobileNetV2 224 (fixtures/mv2_224, ethos-u55-128, beside
# Vela's compilation, against a 2 MiB SRAM budget) to a PNG with headless Chromium.
#
#   tools/render_report.sh [OUT.png]        (default docs/report-mv2.png; run from anywhere)
#
# Environment: NPU=path/to/npu uses a built binary instead of `cargo run --release`;
# CHROMIUM=path picks the browser (default: chromium or chromium-browser on PATH);
# WINDOW=W,H sets the viewport (default 1320,1700: the totals, the bars, the arena plot).
# Without Chromium it says so and exits 0 (CI images without a browser skip the render).
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/docs/report-mv2.png}
case $out in /*) ;; *) out=$(pwd)/$out ;; esac

chromium=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$chromium" ]; then
    echo "render_report: chromium not found (Debian: apt-get install chromium); not rendering" >&2
    exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
html=$work/report-mv2.html

cd "$root"
if [ -n "${NPU:-}" ]; then
    set -- "$NPU"
else
    set -- cargo run --quiet --release -p npu-cli --bin npu --
fi
"$@" report fixtures/mv2_224/mv2_224.tflite -t ethos-u55-128 \
    --vela fixtures/mv2_224/vela/ethos-u55-128 --sram-limit 2M --html "$html" >"$work/report.json"

# A throwaway profile and no background services: nothing leaves the machine, nothing is kept.
# `timeout` guards CI against a browser that never exits.
timeout 180 "$chromium" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --hide-scrollbars \
    --user-data-dir="$work/profile" --screenshot="$out" --window-size="${WINDOW:-1320,1700}" \
    "file://$html" >"$work/chromium.log" 2>&1 || {
    cat "$work/chromium.log" >&2
    echo "render_report: chromium failed" >&2
    exit 1
}
if [ ! -s "$out" ]; then
    cat "$work/chromium.log" >&2
    echo "render_report: no screenshot written" >&2
    exit 1
fi
echo "render_report: wrote $out ($(wc -c <"$out") bytes)"
