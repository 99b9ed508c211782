#!/usr/bin/python3
"""Throughput and latency of `hymba serve` at several client counts.

Starts `hymba serve --port 0` on a checkpoint (by default a random model made
with `hymba init --preset P --scale S --vocab-size 259` and the byte
tokenizer, in a temporary directory), reads the URL it prints, then for each
client count K runs K threads, each on one keep-alive connection, that each
send --requests streamed completions of --max-tokens tokens (temperature 0.8,
distinct seeds). Per client count it reports requests/s and generated
tokens/s of wall time (all clients together), p50 / p99 latency (request sent
to last event) and p50 / p99 time to first token (request sent to the first
event with text), and how many requests were refused (429: past --max-queue
or --max-concurrent-requests, which --server-concurrency sets). The load is
bounded (K x --requests requests, each with a 600 s timeout) and only ever
sent to the loopback address the server prints.

--long-prompt N adds one more client that keeps sending a prompt of N
tokens (N characters, byte tokenizer) with max_tokens 1 while the measured
clients run: with --prefill-chunk C the server prefills it C tokens per
round between decode steps, so compare the short requests' first-token
times at --prefill-chunk 256 and at one chunk for the whole prompt
(--prefill-chunk 1000000, how the server prefilled before chunking).

Standard library only:
  bench/serve_throughput.py                                  # clients 1,4,16,64
  bench/serve_throughput.py --clients 1,8 --max-batch 1 --threads 2
  bench/serve_throughput.py --ckpt runs/demo/hymba --max-tokens 128
"""
import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse


def stream_completion(conn, body):
    """Sends one streamed completion on conn; returns (status, first_token_s, total_s, events_with_text)."""
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body=json.dumps(dict(body, stream=True)),
                 headers={"Content-Type": "application/json"})
    res = conn.getresponse()
    if res.status != 200:
        res.read()
        return res.status, None, time.perf_counter() - t0, 0
    first, tokens = None, 0
    for raw in res:  # server-sent events, one "data: ..." line each
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        choice = json.loads(line[6:])["choices"][0]
        if choice.get("text"):
            tokens += 1  # one event per decode step of this sequence (text that became final)
            if first is None:
                first = time.perf_counter() - t0
    return 200, first, time.perf_counter() - t0, tokens


def percentile(values, q):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q / 100 * (len(v) - 1))))]


def run_clients(url, clients, requests, max_tokens, long_prompt=0):
    u = urllib.parse.urlparse(url)
    results, errors = [], []
    lock = threading.Lock()
    done = threading.Event()

    def long_client():
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
        try:
            while not done.is_set():
                stream_completion(conn, {"prompt": "x" * long_prompt, "max_tokens": 1, "temperature": 0})
        finally:
            conn.close()

    def client(k):
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
        try:
            for r in range(requests):
                out = stream_completion(conn, {"prompt": f"Client {k} request {r}:", "max_tokens": max_tokens,
                                               "temperature": 0.8, "seed": 1000 * k + r})
                with lock:
                    results.append(out)
        except Exception as e:  # reported below; the figures would be wrong
            errors.append(f"client {k}: {e}")
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    background = threading.Thread(target=long_client) if long_prompt > 0 else None
    if background:
        background.start()
        time.sleep(0.2)  # its prefill is under way when the measured clients start
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    done.set()
    if background:
        background.join()
    if errors:
        sys.exit("serve_throughput: " + "; ".join(errors))
    return results, seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hymba", default="build/release/hymba")
    ap.add_argument("--ckpt", help="checkpoint to serve (default: a random --preset model)")
    ap.add_argument("--preset", default="hybrid-official")
    ap.add_argument("--scale", default="tiny")
    ap.add_argument("--clients", default="1,4,16,64", help="comma-separated client counts")
    ap.add_argument("--requests", type=int, default=2, help="requests per client")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--server-concurrency", type=int, default=48, help="the server's --max-concurrent-requests")
    ap.add_argument("--prefill-chunk", type=int, default=256, help="the server's --prefill-chunk")
    ap.add_argument("--long-prompt", type=int, default=0,
                    help="tokens of a prompt one more client keeps sending meanwhile (0: none)")
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
                                   "--max-batch", str(args.max_batch), "--prefill-chunk", str(args.prefill_chunk),
                                   "--max-prompt-tokens", str(max(8192, args.long_prompt + 1)),
                                   "--max-concurrent-requests", str(args.server_concurrency)],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            line = server.stdout.readline()
            m = re.search(r"(http://\S+)", line)
            if not m:
                sys.exit(f"serve_throughput: no URL from hymba serve: {line!r}")
            url = m.group(1)
            run_clients(url, 1, 1, 8)  # warm-up
            print(f"model {ckpt if args.ckpt else args.preset + '/' + args.scale}, --threads {args.threads}, "
                  f"--max-batch {args.max_batch}, --max-concurrent-requests {args.server_concurrency}, "
                  f"--prefill-chunk {args.prefill_chunk}, "
                  f"{args.requests} streamed request(s) x {args.max_tokens} tokens per client, keep-alive"
                  + (f", one more client sending {args.long_prompt}-token prompts meanwhile" if args.long_prompt else ""))
            print("| clients | requests | refused (429) | req/s | tok/s | latency p50 / p99 (ms) | "
                  "first token p50 / p99 (ms) |")
            print("|---:|---:|---:|---:|---:|---:|---:|")
            for k in [int(c) for c in args.clients.split(",")]:
                results, seconds = run_clients(url, k, args.requests, args.max_tokens, args.long_prompt)
                ok = [r for r in results if r[0] == 200]
                refused = sum(1 for r in results if r[0] == 429)
                other = [r[0] for r in results if r[0] not in (200, 429)]
                if other:
                    sys.exit(f"serve_throughput: unexpected HTTP statuses {sorted(set(other))}")
                lat = [r[2] * 1000 for r in ok]
                ttft = [r[1] * 1000 for r in ok if r[1] is not None]
                tokens = sum(r[3] for r in ok)
                print(f"| {k} | {len(results)} | {refused} | {len(ok) / seconds:.2f} | {tokens / seconds:.1f} | "
                      f"{percentile(lat, 50):.0f} / {percentile(lat, 99):.0f} | "
                      f"{percentile(ttft, 50):.0f} / {percentile(ttft, 99):.0f} |", flush=True)
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
