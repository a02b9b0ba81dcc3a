#!/usr/bin/env python3
"""Summarizes an Nsight Compute CSV of kernel durations (`ncu --metrics
gpu__time_duration.sum --csv --log-file FILE ...`, as scripts/gpu_checks.sh
--profile writes it): total time of Loom's kernels and of the library GEMMs
(cuBLASLt) and the slowest launches.

Usage: bench/ncu_summary.py NCU.csv [--top 15]
"""
import argparse
import collections
import csv


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    launches = []
    with open(args.csv) as f:
        for row in csv.reader(f):
            if len(row) < 15 or not row[0].isdigit():
                continue
            if row[12] != "gpu__time_duration.sum":
                continue
            ns = float(row[14].replace(",", ""))
            scale = {"ns": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6,
                     "msecond": 1e6, "nsecond": 1}.get(row[13], 1)
            launches.append((ns * scale / 1e6, row[4], row[7], row[8]))
    if not launches:
        print("no kernel durations in %s" % args.csv)
        return 1
    groups = collections.defaultdict(lambda: [0, 0.0])
    for ms, name, _, _ in launches:
        if name.startswith("loom_"):
            key = "Loom's kernels"
        else:
            key = "library (%s)" % ("GEMM" if "gemm" in name.lower() else "other")
        groups[key][0] += 1
        groups[key][1] += ms
    total = sum(ms for ms, *_ in launches)
    print("%d launches, %.2f ms of kernel time" % (len(launches), total))
    for key, (n, ms) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        print("  %-28s %5d launches %9.2f ms  %5.1f%%" % (key, n, ms, 100 * ms / total))
    print("slowest launches:")
    for ms, name, block, grid in sorted(launches, reverse=True)[:args.top]:
        print("  %8.3f ms  %-40s block %s grid %s" % (
            ms, name[:40], block, grid))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
