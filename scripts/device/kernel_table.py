#!/usr/bin/env python3
"""Sums Nsight Compute's per-launch GPU times (`ncu --csv --print-units base --metrics gpu__time_duration.sum`)
by kernel name: launches, total and mean microseconds, and the total divided by the decode steps of the run.
    kernel_table.py kernels.csv STEPS"""
import csv
import sys
from collections import defaultdict


def main() -> None:
    path, steps = sys.argv[1], int(sys.argv[2])
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]  # ncu's own log lines are not CSV rows
    totals, counts = defaultdict(float), defaultdict(int)
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = row["Kernel Name"].split("(")[0][:90]
        totals[name] += float(row["Metric Value"].replace(",", "")) / 1000.0  # ns -> us
        counts[name] += 1
    grand = sum(totals.values())
    print(f"{'kernel':90s} {'launches':>8s} {'total us':>10s} {'mean us':>9s} {'us/step':>9s}")
    for name, total in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"{name:90s} {counts[name]:8d} {total:10.1f} {total / counts[name]:9.2f} {total / steps:9.1f}")
    print(f"{'all kernels':90s} {sum(counts.values()):8d} {grand:10.1f} {'':9s} {grand / steps:9.1f}")


if __name__ == "__main__":
    main()
