#!/usr/bin/env python3
"""Prints DejaVu Sans advance widths (units of 1/2048 em) for the characters plot labels use,
as the Rust table in benchkit/src/plot/metrics.rs. Reads the TTF's cmap (format 4) and hmtx."""
import struct, sys
path = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
data = open(path, "rb").read()
num_tables = struct.unpack(">H", data[4:6])[0]
tables = {}
for i in range(num_tables):
    tag, _, offset, length = struct.unpack(">4sIII", data[12 + 16 * i: 28 + 16 * i])
    tables[tag.decode()] = (offset, length)
units = struct.unpack(">H", data[tables["head"][0] + 18: tables["head"][0] + 20])[0]
metrics = struct.unpack(">H", data[tables["hhea"][0] + 34: tables["hhea"][0] + 36])[0]
hmtx = tables["hmtx"][0]
advance = lambda glyph: struct.unpack(">H", data[hmtx + 4 * min(glyph, metrics - 1): hmtx + 4 * min(glyph, metrics - 1) + 2])[0]
cmap = tables["cmap"][0]
count = struct.unpack(">H", data[cmap + 2: cmap + 4])[0]
sub = None
for i in range(count):
    platform, encoding, offset = struct.unpack(">HHI", data[cmap + 4 + 8 * i: cmap + 12 + 8 * i])
    if platform == 3 and encoding == 1:
        sub = cmap + offset
segs = struct.unpack(">H", data[sub + 6: sub + 8])[0] // 2
arr = lambda base, i: struct.unpack(">H", data[base + 2 * i: base + 2 * i + 2])[0]
ends, starts = sub + 14, sub + 16 + 2 * segs
deltas, ranges = starts + 2 * segs, starts + 4 * segs
def glyph(code):
    for s in range(segs):
        if arr(ends, s) >= code:
            if arr(starts, s) > code:
                return 0
            delta, rng = arr(deltas, s), arr(ranges, s)
            if rng == 0:
                return (code + delta) & 0xFFFF
            g = arr(ranges + 2 * s + rng + 2 * (code - arr(starts, s)), 0)
            return (g + delta) & 0xFFFF if g else 0
    return 0
assert units == 2048, units
print("pub const ASCII: [u16; 95] = [")
row = [str(advance(glyph(c))) for c in range(32, 127)]
for i in range(0, 95, 16):
    print("    " + ", ".join(row[i:i + 16]) + ",")
print("];")
extra = "×–—−µ±≥≤…°·→←≈"
print("pub const OTHERS: [(char, u16); %d] = [" % len(extra))
for ch in extra:
    print("    ('%s', %d)," % (ch, advance(glyph(ord(ch)))))
print("];")
