#!/usr/bin/env bash
# Render a tune.html in headless Chromium, take a screenshot and check it is not blank.
#
#   scripts/check_tune_html.sh reports/tune/tune.html [screenshot.png]
#
# Exit codes: 0 the page rendered with content, 1 the screenshot is blank (or missing),
# 2 bad usage or no Chromium (install it with `apt-get install -y chromium`).
set -euo pipefail

usage() { echo "usage: $0 PATH/TO/tune.html [SCREENSHOT.png]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
html=$1
[ -f "$html" ] || { echo "error: $html: no such file" >&2; exit 2; }

chromium=${CHROMIUM:-}
if [ -z "$chromium" ]; then
    for c in /usr/bin/chromium chromium chromium-browser google-chrome; do
        if command -v "$c" >/dev/null 2>&1; then chromium=$(command -v "$c"); break; fi
    done
fi
if [ -n "$chromium" ] && ! [ -x "$chromium" ] && ! command -v "$chromium" >/dev/null 2>&1; then
    echo "error: Chromium not found at $chromium (from CHROMIUM)." >&2
    echo "       Install it with: apt-get update && apt-get install -y chromium" >&2
    exit 2
fi
if [ -z "$chromium" ]; then
    echo "error: Chromium not found (looked for chromium, chromium-browser, google-chrome; or set CHROMIUM)." >&2
    echo "       Install it with: apt-get update && apt-get install -y chromium" >&2
    exit 2
fi
command -v python3 >/dev/null 2>&1 || { echo "error: python3 is needed to inspect the screenshot" >&2; exit 2; }

abs=$(cd "$(dirname "$html")" && pwd)/$(basename "$html")
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
shot=${2:-$profile/screenshot.png}
rm -f "$shot"

# Chromium writes the screenshot and exits; its chatter goes to a log shown only on failure.
if ! timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --hide-scrollbars \
    --user-data-dir="$profile" --screenshot="$shot" --window-size=1200,2000 \
    "file://$abs" >"$profile/chromium.log" 2>&1; then
    echo "error: Chromium failed to render $html:" >&2
    tail -20 "$profile/chromium.log" >&2
    exit 1
fi
[ -s "$shot" ] || { echo "FAIL: Chromium wrote no screenshot for $html" >&2; tail -20 "$profile/chromium.log" >&2; exit 1; }

# Decode the PNG (8-bit greyscale/RGB/RGBA, non-interlaced: what Chromium writes) and count
# colours and non-white pixels. A blank page is one colour; ours has plots, text and a table.
python3 - "$shot" <<'PY'
import struct, sys, zlib

path = sys.argv[1]
data = open(path, "rb").read()
if data[:8] != b"\x89PNG\r\n\x1a\n":
    sys.exit(f"FAIL: {path} is not a PNG")
pos, idat, width = 8, b"", None
while pos < len(data):
    (length,) = struct.unpack(">I", data[pos:pos + 4])
    kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
    if kind == b"IHDR":
        width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
    elif kind == b"IDAT":
        idat += body
    pos += 12 + length
if width is None or depth != 8 or interlace != 0 or colour not in (0, 2, 4, 6):
    sys.exit(f"FAIL: unsupported PNG layout in {path}")
bpp = {0: 1, 2: 3, 4: 2, 6: 4}[colour]
raw, stride = zlib.decompress(idat), width * bpp
prev, colours, ink = bytearray(stride), set(), 0
for y in range(height):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    if y % 2 == 0:  # every other row is plenty to judge blankness, and twice as fast
        for x in range(0, stride, bpp):
            px = bytes(line[x:x + min(bpp, 3)])
            colours.add(px)
            if px != b"\xff" * len(px):
                ink += 1
    prev = line
sampled = (height + 1) // 2 * width
share = 100.0 * ink / max(sampled, 1)
print(f"{path}: {width}x{height}, {len(colours)} distinct colours, {share:.1f}% non-white pixels")
if len(colours) < 8 or share < 1.0:
    sys.exit("FAIL: the screenshot is blank (or nearly so)")
print("OK: the page rendered with content")
PY
