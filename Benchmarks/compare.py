#!/usr/bin/env python3
"""A/B comparison of server binaries with agentrpc-bench.

On a small shared machine one run says little: other jobs move every figure by
10-50 %. This runs the benchmark for each binary in turn, ROUNDS times
alternating, and prints the median of every figure per binary, so both see the
same mix of machine states.

    Benchmarks/compare.py 5 /tmp/agentrpc-before .build/release/agentrpc -- --only deltas,tools

Everything after `--` goes to agentrpc-bench unchanged. Stdlib only.
"""
import json
import os
import statistics
import subprocess
import sys

BENCH = os.environ.get("AGENTRPC_BENCH", ".build/release/agentrpc-bench")


def main(argv):
    if len(argv) < 3 or not argv[1].isdigit():
        print(__doc__, file=sys.stderr)
        return 2
    rounds = int(argv[1])
    rest = argv[2:]
    extra = []
    if "--" in rest:
        cut = rest.index("--")
        rest, extra = rest[:cut], rest[cut + 1:]
    binaries = rest
    results = {b: [] for b in binaries}
    for _ in range(rounds):
        for binary in binaries:
            run = subprocess.run([BENCH, "--binary", binary] + extra, capture_output=True, text=True)
            lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
            if run.returncode != 0 or not lines:
                print(f"{binary}: agentrpc-bench failed:\n{run.stderr}", file=sys.stderr)
                return 1
            results[binary].append(json.loads(lines[-1]))
    keys = []
    for runs in results.values():
        for key, value in runs[0].items():
            if isinstance(value, (int, float)) and key not in keys:
                keys.append(key)
    width = max(len(k) for k in keys)
    print(f"{'median of ' + str(rounds):{width}}" + "".join(f"{os.path.basename(b):>24}" for b in binaries))
    for key in keys:
        cells = []
        for binary in binaries:
            values = [r[key] for r in results[binary] if isinstance(r.get(key), (int, float))]
            cells.append(f"{statistics.median(values):>24.2f}" if values else f"{'-':>24}")
        print(f"{key:{width}}" + "".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
