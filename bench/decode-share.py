#!/usr/bin/env python3
"""Decode as a share of the memory read bandwidth, measured so that a noisy
machine cannot decide it.

`pocketlm bench` divides decode's bytes per second by one bandwidth probe made
in the same process; on a shared VM that probe alone swings 33-68 GB/s from one
run to the next.  Here each round runs, per file, a fresh `pocketlm probe`
(median of its passes) and then `pocketlm bench -p 0 -n N`, alternating; the
share is the median decode rate over the median probe of the same minutes.

A second share pairs each decode run with the probes just before and just
after it (the next run's probe, one more at the end): on a VM whose two vCPUs
move between placements the two-thread probe is bimodal (here ~35 or ~70-85
GB/s, flipping from one minute to the next), so a run whose two probes
differ by more than 15% straddled a flip and is left out; the paired share is
the median over the kept runs of decode over the mean of its two probes.

usage: bench/decode-share.py [--bin build/pocketlm] [-t 2] [-n 64] [-r 5] FILE.gguf...
"""
import argparse
import json
import statistics
import subprocess


def probe(binary, threads):
    out = subprocess.run([binary, "probe", "-o", "json", "-t", str(threads)], check=True,
                         capture_output=True, text=True).stdout
    bw = json.loads(out)["bandwidth"]
    return max(r["gbps"] for r in bw["read_gbps"] if r["threads"] == threads)


def decode(binary, path, threads, n):
    out = subprocess.run([binary, "bench", "-m", path, "-p", "0", "-n", str(n), "-t", str(threads), "-r", "3",
                          "-o", "json"], check=True, capture_output=True, text=True).stdout
    row = json.loads(out)[0]
    return row["avg_ts"], row["weight_bytes_per_token"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--bin", default="build/pocketlm")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-n", "--n-gen", type=int, default=64)
    ap.add_argument("-r", "--rounds", type=int, default=5)
    a = ap.parse_args()
    probes, rates, nbytes = [], {f: [] for f in a.files}, {}
    for r in range(a.rounds):
        for f in a.files:
            probes.append(probe(a.bin, a.threads))
            ts, nbytes[f] = decode(a.bin, f, a.threads, a.n_gen)
            rates[f].append(ts)
            print(f"round {r + 1}  probe {probes[-1]:6.2f} GB/s  {f}  {ts:8.2f} t/s  "
                  f"{ts * nbytes[f] / 1e9:6.2f} GB/s", flush=True)
    probes.append(probe(a.bin, a.threads))
    paired = {f: [] for f in a.files}
    for i in range(len(probes) - 1):
        f = a.files[i % len(a.files)]
        before, after = probes[i], probes[i + 1]
        if abs(before - after) <= 0.15 * max(before, after):
            paired[f].append(rates[f][i // len(a.files)] * nbytes[f] / 1e9 / ((before + after) / 2))
    ceiling = statistics.median(probes)
    print(f"\nprobe, {a.threads} threads: median {ceiling:.2f} GB/s of {len(probes)} "
          f"(min {min(probes):.2f}, max {max(probes):.2f})\n")
    print(f"| file | bytes/token | tg{a.n_gen} t/s (median) | decode GB/s | share of the median probe "
          "| paired share (median, runs kept) |")
    print("|---|--:|--:|--:|--:|--:|")
    for f in a.files:
        ts = statistics.median(rates[f])
        gbps = ts * nbytes[f] / 1e9
        pair = f"{100 * statistics.median(paired[f]):.1f}% ({len(paired[f])} of {a.rounds})" if paired[f] else "-"
        print(f"| {f} | {nbytes[f] / 2**20:.1f} MiB | {ts:.2f} | {gbps:.2f} | {100 * gbps / ceiling:.1f}% | {pair} |")


if __name__ == "__main__":
    main()
