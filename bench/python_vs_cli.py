#!/usr/bin/env python3
"""Training speed of the Python package against the command line on the same
recipe: `hymba train` and `hymba.train(...)` take turns (CLI, Python, CLI,
Python, ...) and each run's tokens per second of training time comes from
its summary.json. Prints both and their ratio; docs/python.md keeps the table.

  PYTHONPATH=build/release/python python3 bench/python_vs_cli.py \
      [--hymba build/release/hymba] [--preset hybrid-official] [--scale tiny] \
      [--steps 60] [--threads 2] [--rounds 2] [--data default]

Run it on a quiet machine: it is a timing.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def cli_run(args, out):
    cmd = [args.hymba, "--threads", str(args.threads), "train", "--preset", args.preset, "--scale", args.scale,
           "--steps", str(args.steps), "--data", args.data, "--out", out, "--quiet"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)["train_tokens_per_s"]


def python_run(args, out):
    import hymba
    hymba.set_threads(args.threads)
    summary = hymba.train(args.preset, args.data, out, scale=args.scale, steps=args.steps, progress=False)
    return summary["train_tokens_per_s"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hymba", default="build/release/hymba")
    p.add_argument("--preset", default="hybrid-official")
    p.add_argument("--scale", default="tiny")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--data", default="default")
    args = p.parse_args()
    try:
        import hymba
    except ImportError as e:
        sys.exit(f"python_vs_cli: cannot import hymba ({e}); set PYTHONPATH=build/release/python")
    print(f"hymba {hymba.__version__}, omp_wait_policy "
          f"{hymba.build_info().get('omp_wait_policy', '?')!r}; {args.preset} {args.scale}, {args.steps} steps, "
          f"{args.threads} threads, {args.rounds} rounds")
    cli, py = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            cli.append(cli_run(args, os.path.join(tmp, f"cli{r}")))
            py.append(python_run(args, os.path.join(tmp, f"py{r}")))
            print(f"round {r + 1}: CLI {cli[-1]:.0f} tok/s, Python {py[-1]:.0f} tok/s")
    c, q = statistics.median(cli), statistics.median(py)
    print(f"median: CLI {c:.0f} tok/s, Python {q:.0f} tok/s, Python / CLI {q / c:.3f}")


if __name__ == "__main__":
    main()
