#!/usr/bin/python3
"""Throughput of `hymba serve` with 1 and with several concurrent clients.

Starts `hymba serve --port 0` on a checkpoint (by default a random model made
with `hymba init --preset P --scale S --vocab-size 259` and the byte
tokenizer, in a temporary directory), reads the URL it prints, then for each
client count K runs K threads that each send --requests completions of
--max-tokens tokens (temperature 0.8, distinct seeds) and reports generated
tokens per second of wall time, all clients together. With K > 1 the server
decodes the clients' sequences in shared batched steps (--max-batch);
--max-batch 1 shows one sequence at a time for comparison.

Standard library only:
  bench/serve_throughput.py                              # clients 1 and 8
  bench/serve_throughput.py --clients 1,4,8 --max-batch 1 --threads 2
  bench/serve_throughput.py --ckpt runs/demo/hymba --max-tokens 128
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request


def post(url, body):
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def run_clients(url, clients, requests, max_tokens):
    tokens = [0] * clients
    errors = []

    def client(k):
        try:
            for r in range(requests):
                out = post(url, {"prompt": f"Client {k} request {r}:", "max_tokens": max_tokens,
                                 "temperature": 0.8, "seed": 1000 * k + r})
                tokens[k] += out["usage"]["completion_tokens"]
        except Exception as e:  # reported below; the figure would be wrong
            errors.append(f"client {k}: {e}")

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    if errors:
        sys.exit("serve_throughput: " + "; ".join(errors))
    return sum(tokens), seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hymba", default="build/release/hymba")
    ap.add_argument("--ckpt", help="checkpoint to serve (default: a random --preset model)")
    ap.add_argument("--preset", default="hybrid-official")
    ap.add_argument("--scale", default="tiny")
    ap.add_argument("--clients", default="1,8", help="comma-separated client counts")
    ap.add_argument("--requests", type=int, default=2, help="requests per client")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        ckpt = args.ckpt
        if ckpt is None:
            ckpt = os.path.join(tmp, "model")
            subprocess.run([args.hymba, "init", "--preset", args.preset, "--scale", args.scale, "--vocab-size", "259",
                            "--out", ckpt], check=True, stdout=subprocess.DEVNULL)
            subprocess.run([args.hymba, "tokenizer", "train", "--type", "byte", "--out",
                            os.path.join(ckpt, "tokenizer.model")], check=True, stdout=subprocess.DEVNULL)
        server = subprocess.Popen([args.hymba, "serve", "--ckpt", ckpt, "--port", "0", "--threads", str(args.threads),
                                   "--max-batch", str(args.max_batch)],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            line = server.stdout.readline()
            m = re.search(r"(http://\S+)", line)
            if not m:
                sys.exit(f"serve_throughput: no URL from hymba serve: {line!r}")
            url = m.group(1)
            run_clients(url, 1, 1, 8)  # warm-up
            print(f"model {ckpt if args.ckpt else args.preset + '/' + args.scale}, --threads {args.threads}, "
                  f"--max-batch {args.max_batch}, {args.requests} request(s) x {args.max_tokens} tokens per client")
            base = None
            for k in [int(c) for c in args.clients.split(",")]:
                tokens, seconds = run_clients(url, k, args.requests, args.max_tokens)
                rate = tokens / seconds
                base = base or rate
                print(f"{k:3d} client(s): {tokens:6d} tokens in {seconds:7.2f} s = {rate:8.1f} tok/s "
                      f"({rate / base:.2f}x)")
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
