#!/usr/bin/python3
"""Data-parallel training over MPI: measured here, and modelled on paper.

Measure (--measure): trains Hybrid-Official at a scale for a few dozen steps
as one process with 2 threads and as `mpirun -np 2` with 1 thread per rank,
on the same global batch, and prints train tok/s and the share of the step
time the ranks spent summing (summary.json's comm_share: the time in the
fixed-order sums, waits for the slower rank included; grad_sum_share: the
gradient sum alone, after every rank arrived).

Model (always): for N = 2..64 nodes, the gradient sum moves
2 (N-1)/N x bytes per node (ring allreduce, which the fixed-order sum of
src/dist matches in bytes), bytes = parameters x 4, plus 2 (N-1) latencies.
Against the compute time of one node's share of the batch (measured here,
or given with --seconds-per-sequence), efficiency = compute / (compute +
communication), with no overlap of the two (hymba sums after the backward
pass). The table says where it falls below 80 %.

  bench/mpi_scaling.py --measure --scale tiny --steps 40
  bench/mpi_scaling.py --params 29.48e6 --seconds-per-sequence 0.24
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

MPIRUN = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "--mca", "btl", "self,vader",
          "--mca", "btl_vader_single_copy_mechanism", "none"]


def train(hymba, prefix, threads, args, out):
    cmd = prefix + [hymba, "--threads", str(threads), "train", "--preset", "hybrid-official", "--scale", args.scale,
                    "--data", args.data, "--steps", str(args.steps), "--batch", str(args.batch), "--seq-len",
                    str(args.seq_len), "--eval-interval", "100000", "--eval-windows", "4", "--save-interval",
                    "100000", "--quiet", "--json", "--out", out]
    env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "passive"))
    env.pop("OMP_NUM_THREADS", None)
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)


def measure(args):
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeats):
            one = train(args.hymba, [], 2, args, os.path.join(tmp, f"one{rep}"))
            two = train(args.hymba, MPIRUN + ["-np", "2"], 1, args, os.path.join(tmp, f"two{rep}"))
            rows.append((one, two))
    print(f"hybrid-official --scale {args.scale}: {rows[0][0]['params'] / 1e6:.2f}M parameters, "
          f"{args.steps} steps of {args.batch} x {args.seq_len} tokens")
    print("| run | 1 process, 2 threads (tok/s) | mpirun -np 2, 1 thread each (tok/s) | communication share (2 ranks) "
          "| gradient sum alone |")
    print("|--:|--:|--:|--:|--:|")
    for rep, (one, two) in enumerate(rows):
        print(f"| {rep + 1} | {one['train_tokens_per_s']:.0f} | {two['train_tokens_per_s']:.0f} | "
              f"{100 * two['comm_share']:.1f}% | {100 * two.get('grad_sum_share', 0):.1f}% |")
    best = max(one["train_tokens_per_s"] for one, _ in rows)
    return rows[0][0]["params"], args.seq_len / best  # seconds per sequence on one 2-core node


def model(params, seconds_per_sequence, seq_len, latency):
    grad_bytes = params * 4
    print(f"\nscaling model: {params / 1e6:.2f}M parameters = {grad_bytes / 1e6:.1f} MB of gradients per step; "
          f"compute {seconds_per_sequence * 1e3:.1f} ms per sequence of {seq_len} tokens on one node; "
          f"latency {latency * 1e6:.0f} us per message")
    batches = [1, 4, 16, 64]
    print("| N | allreduce 10 Gbit/s (ms) | allreduce 100 Gbit/s (ms) | "
          + " | ".join(f"eff. b={b} @10G / @100G" for b in batches) + " |")
    print("|--:|--:|--:|" + "--:|" * len(batches))
    below = {}
    for n in [2, 4, 8, 16, 32, 64]:
        times = []
        for gbit in (10, 100):
            bandwidth = gbit * 1e9 / 8
            times.append(2 * (n - 1) / n * grad_bytes / bandwidth + 2 * (n - 1) * latency)
        cells = []
        for b in batches:
            compute = b * seconds_per_sequence
            effs = [compute / (compute + t) for t in times]
            for gbit, eff in zip((10, 100), effs):
                if eff < 0.8 and (b, gbit) not in below:
                    below[(b, gbit)] = n
            cells.append(f"{100 * effs[0]:.0f}% / {100 * effs[1]:.0f}%")
        print(f"| {n} | {times[0] * 1e3:.1f} | {times[1] * 1e3:.1f} | " + " | ".join(cells) + " |")
    for b in batches:
        for gbit in (10, 100):
            n = below.get((b, gbit))
            print(f"per-node batch {b} at {gbit} Gbit/s: "
                  + (f"efficiency below 80% from N = {n}" if n else "efficiency stays >= 80% up to N = 64"))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hymba", default="build/release/hymba")
    p.add_argument("--measure", action="store_true", help="train 1 process vs mpirun -np 2 here first")
    p.add_argument("--scale", default="tiny")
    p.add_argument("--data", default="default")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--params", type=float, help="parameters (without --measure)")
    p.add_argument("--seconds-per-sequence", type=float, help="one node's compute per sequence (without --measure)")
    p.add_argument("--latency", type=float, default=20e-6, help="seconds per message (TCP over Ethernet: ~20 us)")
    args = p.parse_args()
    if args.measure:
        params, per_sequence = measure(args)
    else:
        if args.params is None or args.seconds_per_sequence is None:
            p.error("give --measure, or --params and --seconds-per-sequence")
        params, per_sequence = args.params, args.seconds_per_sequence
    model(params, per_sequence, args.seq_len, args.latency)


if __name__ == "__main__":
    main()
