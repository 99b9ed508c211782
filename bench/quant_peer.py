#!/usr/bin/python3
"""Prefill, decode and peak RSS of the engine against llama.cpp on the same GGUF files.

For each --gguf NAME=FILE, --rounds times, alternating the two programs:
  * hymba: `hymba --threads N bench infer --ckpt FILE --prompt-len P
    --new-tokens D --batch 1 --contexts P,P,P --json` (the file runs in its
    own format: Q4_0 as q4, Q8_0 as q8);
  * llama.cpp: bench/llama_speed.c on the prebuilt CPU library of the npm
    package @node-llama-cpp/linux-x64 (v0.5.0), the same prompt length,
    decode steps and threads, the context's default settings.
Both give the same statistic, the best of three steady-state rounds in one
process: llama.cpp runs 4 rounds and gives the best of rounds 2-4 (its
first round faults the mapped file in); the engine times its three
`--contexts` rounds, each a fresh prompt of P tokens prefilled and then
decoded at that context, after its first prompts and the decoder's choice
of thread count (its own mean prefill figure, which holds the first prompt,
is not used).
Peak RSS: llama.cpp's ru_maxrss (wait4); the engine's own peak as `bench
infer` reports it, taken before its bandwidth probe adds a 512 MiB buffer.
Prints a markdown table of medians over the rounds and the
engine/llama.cpp ratios, and writes --json if given.
Run it with the machine otherwise idle: the two programs never run at once.

  bench/quant_peer.py --hymba build/release/hymba --llama-src /tmp/llama-src \\
      --libdir NODE_MODULES/@node-llama-cpp/linux-x64/bins/linux-x64 \\
      --gguf tinyllama-q4_0=/tmp/tl-q4_0.gguf --gguf mamba-q8_0=/tmp/m-q8_0.gguf
Needs a C compiler and llama.cpp's headers (the source bundle of the npm
package node-llama-cpp, unpacked at --llama-src); nothing else."""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def build_peer(llama_src, libdir, out):
    if os.path.exists(out) and os.path.getmtime(out) > os.path.getmtime(os.path.join(HERE, "llama_speed.c")):
        return out
    cmd = ["cc", "-O2", os.path.join(HERE, "llama_speed.c"), "-I", os.path.join(llama_src, "include"),
           "-I", os.path.join(llama_src, "ggml", "include"), "-L", libdir, "-l:libllama.v0.5.0.so",
           "-l:libggml.v0.5.0.so", "-l:libggml-base.so", "-Wl,-rpath," + libdir, "-o", out]
    subprocess.run(cmd, check=True)
    return out


def timed(cmd, env):
    """Runs cmd as a child and returns (stdout, its peak RSS in bytes)."""
    pid = os.fork()
    if pid == 0:
        fd = os.open(env["_QP_OUT"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.execvpe(cmd[0], cmd, env)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"quant_peer: `{' '.join(cmd)}` failed (exit {os.waitstatus_to_exitcode(status)})")
    with open(env["_QP_OUT"]) as f:
        return f.read(), usage.ru_maxrss * 1024


def last_json_line(text):
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    sys.exit("quant_peer: no JSON in the output:\n" + text[-500:])


def hymba_round(args, path, env):
    contexts = ",".join([str(args.prompt_len)] * 3)
    cmd = [args.hymba, "--threads", str(args.threads), "bench", "infer", "--ckpt", path, "--prompt-len",
           str(args.prompt_len), "--new-tokens", str(args.new_tokens), "--batch", "1", "--contexts",
           contexts, "--json"]
    out, _ = timed(cmd, env)
    j = json.loads(out)
    # The three rounds at the prompt's context (`contexts`), timed after the
    # first prompts and the decoder's choice of threads (its first batch-1
    # figure also holds the one-thread trial steps): the best of them, as
    # llama.cpp's. Peak RSS: its own, taken before its bandwidth probe
    # allocates 512 MiB.
    rounds = j["contexts"]
    return {"prefill": max(c["prefill_tokens_per_s"] for c in rounds),
            "decode": max(1e3 / c["decode_ms_per_token"] for c in rounds), "rss": j["peak_rss_bytes"]}


def llama_round(args, peer, path, env):
    out, rss = timed([peer, path, str(args.prompt_len), str(args.new_tokens), str(args.threads), "4"], env)
    j = last_json_line(out)
    # Its first rounds fault the mapped file in and warm its thread pool:
    # the best of the three after the first is its steady state.
    later = j["rounds"][1:]
    return {"prefill": max(r["prefill_tok_s"] for r in later), "decode": max(r["decode_tok_s"] for r in later),
            "rss": rss}


def median(rows, key):
    return statistics.median(r[key] for r in rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hymba", required=True)
    ap.add_argument("--llama-src", required=True, help="llama.cpp source (for llama.h)")
    ap.add_argument("--libdir", required=True, help="the prebuilt library folder of @node-llama-cpp/linux-x64")
    ap.add_argument("--gguf", action="append", required=True, metavar="NAME=FILE")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompt-len", type=int, default=256)
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--peer-bin", default="/tmp/llama_speed")
    ap.add_argument("--json", help="write every round here")
    args = ap.parse_args()
    files = []
    for spec in args.gguf:
        name, sep, path = spec.partition("=")
        if not sep or not os.path.isfile(path):
            sys.exit(f"quant_peer: --gguf {spec}: expected NAME=FILE with an existing file")
        files.append((name, path))
    peer = build_peer(args.llama_src, args.libdir, args.peer_bin)
    env = dict(os.environ, LLAMA_PEER_LIBDIR=args.libdir, _QP_OUT=args.peer_bin + ".out")
    env.pop("OPENBLAS_CORETYPE", None)
    results = {name: {"hymba": [], "llama": []} for name, _ in files}
    for r in range(args.rounds):
        for name, path in files:
            results[name]["hymba"].append(hymba_round(args, path, env))
            results[name]["llama"].append(llama_round(args, peer, path, env))
            h, l = results[name]["hymba"][-1], results[name]["llama"][-1]
            print(f"round {r + 1}/{args.rounds} {name}: prefill {h['prefill']:.1f} vs {l['prefill']:.1f}, "
                  f"decode {h['decode']:.1f} vs {l['decode']:.1f} tok/s", file=sys.stderr, flush=True)
    print(f"| file | prefill {args.prompt_len} tok/s: hymba / llama.cpp / ratio | decode b1 tok/s: hymba / "
          f"llama.cpp / ratio | peak RSS GB: hymba / llama.cpp / ratio |")
    print("|---|---|---|---|")
    for name, _ in files:
        h, l = results[name]["hymba"], results[name]["llama"]
        cells = []
        for key, scale in (("prefill", 1), ("decode", 1), ("rss", 1e9)):
            a, b = median(h, key) / scale, median(l, key) / scale
            cells.append(f"{a:.{2 if key == 'rss' else 1}f} / {b:.{2 if key == 'rss' else 1}f} / {a / b:.2f}x")
        print(f"| {name} | " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
