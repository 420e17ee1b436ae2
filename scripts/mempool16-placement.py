#!/usr/bin/env python3
"""Issue #34 item 6: is the old mempool:16 (now mempool:2) slowdown a placement effect?

Three arms of `cargo xtask bench sense-reserve --quick` with `pressure=none`, on one kernel
built once from this checkout, booted in rotation (boot i runs the arms in order i mod 3):

  default  the nine stacks in the default order (mempool:2 at position 2, mempool:16 at 5)
  swapped  mempool:2 and mempool:16 exchange positions (`sense_modes=`), nothing else moves
  padded   the default order with one page of DMA backing and of heap taken just before
           stack 2 is built (`sense_pad=2:1`), so mempool:2 and every later stack move by a page

Per boot and stack: the stack's IOPS (median of its 9 rotated rounds) over the median of
the boot's nine stacks. Per arm: the median of that over the boots, with a distribution-free
95% confidence interval (order statistics of the binomial; for 12 boots [x(3), x(10)], 96.1%),
and the same for mempool:2's IOPS over mempool:16's in the same boot. Run it on a quiet host:

  python3 scripts/mempool16-placement.py --boots 12 --out target/m16

Every boot's JSON is kept under --out, with the load average before it; the summary is
printed and written to --out/summary.md. `--summarise-only` recomputes from a kept --out.
"""

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time

DEFAULT = "slab,mempool:1,mempool:2,mempool:3,mempool:4,mempool:16,pertag,prealloc,backup"
SWAPPED = "slab,mempool:1,mempool:16,mempool:3,mempool:4,mempool:2,pertag,prealloc,backup"
ARMS = {
    "default": "pressure=none",
    "swapped": f"pressure=none sense_modes={SWAPPED}",
    "padded": "pressure=none sense_pad=2:1",
}
MODES = DEFAULT.split(",")


def median_ci(values):
    """Median and a distribution-free >= 95% interval [x(k), x(n+1-k)] with its coverage."""
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        return None
    cdf, k = 0.0, 0
    # Largest k with P(Binom(n, 1/2) <= k - 1) <= 0.025.
    while True:
        p_next = math.comb(n, k) / 2**n
        if cdf + p_next > 0.025:
            break
        cdf += p_next
        k += 1
    if k == 0:
        return statistics.median(xs), None, None, 0.0
    return statistics.median(xs), xs[k - 1], xs[n - k], 1 - 2 * cdf


def load_average():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def build_kernel(root, out):
    subprocess.run(
        ["cargo", "build", "--release", "-p", "kernel", "--target", "x86_64-unknown-none"],
        cwd=root,
        check=True,
    )
    kernel = os.path.join(out, "kernel.elf")
    shutil.copy(os.path.join(root, "target/x86_64-unknown-none/release/kernel"), kernel)
    return kernel


def boot(root, kernel, arm, path):
    command = [
        "cargo", "xtask", "bench", "sense-reserve", "--quick",
        "--kernel", kernel, "--kernel-args", ARMS[arm],
    ]
    load = load_average()
    subprocess.run(command, cwd=root, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(root, "target/bench/sense-reserve.json")) as f:
        document = json.load(f)
    document["m16_arm"], document["m16_load_before"] = arm, load
    with open(path, "w") as f:
        json.dump(document, f)


def per_boot(path):
    """(arm, {mode: IOPS over the boot's median}, load before the boot)."""
    with open(path) as f:
        document = json.load(f)
    iops = {r["sense_mode"]: r["iops"] for r in document["results"] if r.get("scenario") == "none"}
    if set(iops) != set(MODES) or any(r.get("verdict") != "OK" for r in document["results"]):
        raise SystemExit(f"{path}: not the nine stacks all OK: {sorted(iops)}")
    middle = statistics.median(iops.values())
    return document["m16_arm"], {m: iops[m] / middle for m in MODES}, iops, document["m16_load_before"]


def summarise(out):
    boots = {arm: [] for arm in ARMS}
    for name in sorted(os.listdir(out)):
        if name.startswith("boot-") and name.endswith(".json"):
            arm, rel, iops, load = per_boot(os.path.join(out, name))
            boots[arm].append((rel, iops, load))
    lines = ["| arm | boots | loads | " + " | ".join(MODES) + " | mempool:2 / mempool:16 |",
             "|---" * (len(MODES) + 4) + "|"]

    def cell(values):
        m, lo, hi, cover = median_ci(values)
        return f"{m:.3f} ({lo:.3f}–{hi:.3f})" if lo is not None else f"{m:.3f}"

    for arm, rows in boots.items():
        if not rows:
            continue
        loads = f"{min(float(r[2]) for r in rows):.1f}–{max(float(r[2]) for r in rows):.1f}"
        cells = [cell([r[0][m] for r in rows]) for m in MODES]
        pair = cell([r[1]["mempool:2"] / r[1]["mempool:16"] for r in rows])
        lines.append(f"| {arm} | {len(rows)} | {loads} | " + " | ".join(cells) + f" | {pair} |")
    n = min(len(rows) for rows in boots.values() if rows)
    _, _, _, cover = median_ci(list(range(n)))
    lines.append("")
    lines.append(
        f"Each cell: median over boots of the stack's IOPS / its boot's median of nine, with a "
        f"distribution-free {100 * cover:.1f}% interval (order statistics, {n} boots)."
    )
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boots", type=int, default=12, help="boots per arm (>= 12)")
    parser.add_argument("--out", default="target/m16", help="where each boot's JSON goes")
    parser.add_argument("--kernel", help="boot this ELF instead of building one")
    parser.add_argument("--summarise-only", action="store_true")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = os.path.abspath(args.out)
    if not args.summarise_only:
        os.makedirs(out, exist_ok=True)
        kernel = os.path.abspath(args.kernel) if args.kernel else build_kernel(root, out)
        arms = list(ARMS)
        started = time.time()
        for i in range(args.boots):
            for j in range(len(arms)):
                arm = arms[(i + j) % len(arms)]
                path = os.path.join(out, f"boot-{i:03}-{j}-{arm}.json")
                boot(root, kernel, arm, path)
                print(f"boot {i} {arm}: done, {time.time() - started:.0f} s", file=sys.stderr)
    summarise(out)


if __name__ == "__main__":
    main()
