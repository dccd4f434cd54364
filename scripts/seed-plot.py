#!/usr/bin/env python3
"""The seed's experiment as a picture: per lab kernel and module size, how long the load took
and how long a task waking every millisecond waited at most (log scale), as an SVG.

Usage: seed-plot.py LAB_ENV_FILES OUT.svg
  LAB_ENV_FILES  the lab kernels' lab.env files, ':'-separated (KLPSYM_TEST_LAB_KERNELS)
scripts/test.sh writes target/seed.svg with it; README shows a copy (docs/seed.svg).
"""
import math
import sys


def read_env(path):
    env = {}
    with open(path) as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                env[k] = v
    return env


def runs(results):
    out, baseline = [], None
    with open(results) as f:
        for line in f:
            if not line.startswith("SEED "):
                continue
            fields = dict(x.split("=", 1) for x in line.split()[1:] if "=" in x)
            if fields["module"] == "-":
                baseline = int(fields["max_us"])
                continue
            n = fields["module"].removeprefix("klp_seed_").removesuffix(".ko")
            out.append((int(n), int(fields["load_us"]), int(fields["max_us"])))
    return sorted(out), baseline


def main():
    envs, out = sys.argv[1], sys.argv[2]
    kernels = []
    for path in filter(None, envs.split(":")):
        env = read_env(path)
        if not env.get("SEED_RESULTS"):
            continue  # no seed experiment on this kernel (no CONFIG_LIVEPATCH, e.g. arm64)
        rs, base = runs(env["SEED_RESULTS"])
        kernels.append((env["RELEASE"], rs, base))
    # Log scale from 1 ms to 100 s.
    lo, hi = math.log10(1e3), math.log10(1e8)
    width, height, left, top, bottom = 760, 360, 70, 40, 80
    plot_h = height - top - bottom
    bars = sum(len(rs) for _, rs, _ in kernels)
    slot = (width - left - 20) / max(bars, 1)

    def y(us):
        v = min(max(math.log10(max(us, 1)), lo), hi)
        return top + plot_h * (1 - (v - lo) / (hi - lo))

    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="18" font-size="13">Loading a livepatch with N klp relocations '
        "(Debian kernels, one vCPU, QEMU TCG)</text>",
    ]
    for us, label in [(1e3, "1 ms"), (1e4, "10 ms"), (1e5, "100 ms"), (1e6, "1 s"), (1e7, "10 s"), (1e8, "100 s")]:
        svg.append(f'<line x1="{left}" x2="{width - 20}" y1="{y(us):.1f}" y2="{y(us):.1f}" stroke="#ddd"/>')
        svg.append(f'<text x="{left - 6}" y="{y(us) + 4:.1f}" text-anchor="end">{label}</text>')
    i = 0
    for release, rs, base in kernels:
        start = i
        for n, load, late in rs:
            x = left + i * slot
            w = slot * 0.38
            svg.append(f'<rect x="{x + slot * 0.08:.1f}" y="{y(load):.1f}" width="{w:.1f}" '
                       f'height="{top + plot_h - y(load):.1f}" fill="#8ab"><title>load {load / 1e6:.2f} s</title></rect>')
            svg.append(f'<rect x="{x + slot * 0.5:.1f}" y="{y(late):.1f}" width="{w:.1f}" '
                       f'height="{top + plot_h - y(late):.1f}" fill="#c55"><title>waited {late / 1e3:.1f} ms</title></rect>')
            svg.append(f'<text x="{x + slot / 2:.1f}" y="{top + plot_h + 14}" text-anchor="middle">N={n}</text>')
            i += 1
        mid = left + (start + i) / 2 * slot
        svg.append(f'<text x="{mid:.1f}" y="{top + plot_h + 30}" text-anchor="middle" font-weight="bold">{release}</text>')
        if base is not None:
            svg.append(f'<text x="{mid:.1f}" y="{top + plot_h + 44}" text-anchor="middle">idle: {base / 1e3:.1f} ms</text>')
    svg.append(f'<rect x="{left}" y="{height - 18}" width="10" height="10" fill="#8ab"/>'
               f'<text x="{left + 14}" y="{height - 9}">finit_module() duration</text>')
    svg.append(f'<rect x="{left + 180}" y="{height - 18}" width="10" height="10" fill="#c55"/>'
               f'<text x="{left + 194}" y="{height - 9}">longest wait of a task waking every 1 ms</text>')
    svg.append("</svg>")
    with open(out + ".tmp", "w") as f:
        f.write("\n".join(svg) + "\n")
    import os
    os.replace(out + ".tmp", out)


main()
