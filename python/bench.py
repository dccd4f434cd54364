"""The Python side of the package's overhead (scripts/bench-python.sh runs it beside
`klpsym-bench calls`, which makes the same calls through the Rust library): a batch of
addresses symbolized into Symbol objects, a patch checked into CheckResult objects; the
fastest and the median round of each."""

import argparse
import statistics
import time

import klpsym


def spread(k, n):
    lo = k.lookup("_stext").address
    hi = k.lookup("_etext").address
    span = max(hi - lo, 1)
    return [lo + ((i * 0x9E3779B97F4A7C15) % (1 << 64)) % span for i in range(n)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--patch", required=True)
    ap.add_argument("--addresses", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    k = klpsym.open(a.kernel)
    addrs = spread(k, a.addresses)
    patch = klpsym.Patch(a.patch)
    batch, check = [], []
    for _ in range(a.runs):
        t = time.perf_counter()
        out = k.symbolize_batch(addrs)
        texts = [s.text for s in out if s is not None]
        batch.append((time.perf_counter() - t) * 1e6)
        assert texts
        t = time.perf_counter()
        run = klpsym.check(patch, [k])
        assert run.results[0].json
        check.append((time.perf_counter() - t) * 1e6)
    bmed = statistics.median(batch)
    print(f"python batch_symbolize n={a.addresses}: min {min(batch):.0f} us, median {bmed:.0f} us ({bmed * 1e3 / a.addresses:.1f} ns/address)")
    print(f"python check: min {min(check):.0f} us, median {statistics.median(check):.0f} us")


if __name__ == "__main__":
    main()
