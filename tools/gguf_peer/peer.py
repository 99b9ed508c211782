#!/usr/bin/env python3
"""Peer check of the engine's GGUF export against llama.cpp itself (docs/gguf.md).

For each checkpoint: exports F32, F16, Q8_0 and Q4_0 GGUF files with
`hymba export --format gguf`, then on the same token ids (a held-out text
tokenized by the engine) compares
  - logits of llama.cpp (llama_peer.c on the prebuilt CPU library of the npm
    package @node-llama-cpp/linux-x64, KV cache F32) and of the engine on the
    same file: max |difference| / max |engine logit|, argmax agreement;
  - perplexity of the held-out text under both;
  - 64 greedy tokens after a prompt (F32 file);
  - the token ids of every text of tests/fixtures/tokenizers/texts.jsonl
    (llama.cpp's tokenizer on the file's tokenizer.ggml.* metadata against the
    engine's tokenizer read from the same file).
Prints a markdown table and writes results.json. Not needed by any C++ test.

  python3 tools/gguf_peer/peer.py --hymba build/release/hymba --peer /tmp/llama_peer \
      --libdir NODE_MODULES/@node-llama-cpp/linux-x64/bins/linux-x64 --work /tmp/peer \
      --text heldout.txt --ckpt mamba=RUN_DIR --ckpt llama=RUN_DIR
Build llama_peer first (see llama_peer.c). Needs python3-numpy (Debian)."""
import argparse, json, os, struct, subprocess

import numpy as np

DTYPES = ["f32", "f16", "q8_0", "q4_0"]


def run(cmd, env=None, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, **kw).stdout


def safetensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        out[k] = np.frombuffer(b[8 + n + s:8 + n + e], dtype=np.float32).reshape(v["shape"])
    return out


def ppl(logits, ids):
    lg = logits[:-1].astype(np.float64)
    lg = lg - lg.max(1, keepdims=True)
    logp = lg - np.log(np.exp(lg).sum(1, keepdims=True))
    return float(np.exp(-logp[np.arange(len(ids) - 1), ids[1:]].mean()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hymba", required=True)
    ap.add_argument("--peer", required=True)
    ap.add_argument("--libdir", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--text", required=True, help="held-out text for logits and PPL")
    ap.add_argument("--texts", default="tests/fixtures/tokenizers/texts.jsonl")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--ckpt", action="append", required=True, help="NAME=DIR")
    a = ap.parse_args()
    env = dict(os.environ, LLAMA_PEER_LIBDIR=a.libdir, OMP_NUM_THREADS="2")
    os.makedirs(a.work, exist_ok=True)
    text = open(a.text, encoding="utf-8").read()
    texts = [json.loads(l) for l in open(a.texts, encoding="utf-8") if l.strip()]
    texts = [t if isinstance(t, str) else t["text"] for t in texts]
    results = []
    for spec in a.ckpt:
        name, ckpt = spec.split("=", 1)
        files = {}
        for d in DTYPES:
            files[d] = os.path.join(a.work, f"{name}.{d}.gguf")
            run([a.hymba, "export", "--format", "gguf", "--dtype", d, "--ckpt", ckpt, "--out", files[d]], env)
        enc = json.loads(run([a.hymba, "tokenizer", "encode", "--tokenizer", files["f32"], "--json", "--text", text], env))
        ids = enc["ids"][: a.tokens]
        ids_txt = os.path.join(a.work, "ids.txt")
        open(ids_txt, "w").write(" ".join(map(str, ids)))
        for d in DTYPES:
            st = os.path.join(a.work, f"{name}.{d}.st")
            run([a.hymba, "forward", "--ckpt", files[d], "--ids", ",".join(map(str, ids)), "--out", st], env)
            eng = safetensors(st)["logits"].reshape(len(ids), -1)
            binf = os.path.join(a.work, f"{name}.{d}.bin")
            run([a.peer, files[d], "logits", ids_txt, binf], env)
            lcp = np.fromfile(binf, dtype=np.float32).reshape(len(ids), -1)
            rel = float(np.abs(eng.astype(np.float64) - lcp).max() / np.abs(eng).max())
            results.append({"model": name, "dtype": d, "tokens": len(ids), "max_rel": rel,
                            "argmax": float((eng.argmax(1) == lcp.argmax(1)).mean()),
                            "ppl_engine": ppl(eng, ids), "ppl_llama": ppl(lcp, ids)})
            print(results[-1], flush=True)
        # Greedy continuation of the first 32 tokens, F32: llama.cpp's cached decode against
        # the engine's full forward per step (no stop at eos), and the engine's own cached
        # `generate` up to where it stops (eos).
        prompt_ids = ids[:32]
        open(ids_txt, "w").write(" ".join(map(str, prompt_ids)))
        greedy_out = os.path.join(a.work, "greedy.txt")
        run([a.peer, files["f32"], "greedy", ids_txt, "64", greedy_out], env)
        lcp_greedy = [int(v) for v in open(greedy_out).read().split()]
        gen = subprocess.run([a.hymba, "generate", "--ckpt", files["f32"], "--prompt-file", "/dev/stdin",
                              "--temperature", "0", "--max-new-tokens", "64", "--json"],
                             input=text_of(a, files["f32"], prompt_ids, env), capture_output=True, text=True,
                             env=env, check=True)
        g = json.loads(gen.stdout.splitlines()[0])
        same_prompt = g["prompt_ids"] == prompt_ids
        eng_greedy = g["ids"]
        n = min(len(eng_greedy), len(lcp_greedy))
        seq = list(prompt_ids)
        for _ in range(64):
            st = os.path.join(a.work, "greedy.st")
            run([a.hymba, "forward", "--ckpt", files["f32"], "--ids", ",".join(map(str, seq)), "--out", st], env)
            seq.append(int(safetensors(st)["logits"].reshape(len(seq), -1)[-1].argmax()))
        forward_greedy = seq[len(prompt_ids):]
        results[-1]["greedy"] = {"tokens": 64, "forward_identical": forward_greedy == lcp_greedy,
                                 "generate_prompt_ids_equal": same_prompt, "generate_compared": n,
                                 "generate_identical": eng_greedy[:n] == lcp_greedy[:n],
                                 "generate_finish": g["finish_reason"]}
        # Tokenization of every parity text.
        jsonl_in = "\n".join(json.dumps(t) for t in texts) + "\n"
        eng_ids = [json.loads(l)["ids"] for l in subprocess.run(
            [a.hymba, "tokenizer", "encode", "--tokenizer", files["f32"], "--jsonl"], input=jsonl_in,
            capture_output=True, text=True, env=env, check=True).stdout.splitlines()]
        # Special-token text in a text: HF tokenizers match it (llama.cpp's parse_special),
        # sentencepiece encodes it as text (llama.cpp without parse_special). Both counts.
        agree = {"tokenize": 0, "tokenize_plain": 0}
        for t, e in zip(texts, eng_ids):
            tf = os.path.join(a.work, "t.txt")
            open(tf, "w", encoding="utf-8").write(t)
            for mode in agree:
                run([a.peer, files["f32"], mode, tf, os.path.join(a.work, "tok.txt")], env)
                agree[mode] += [int(v) for v in open(os.path.join(a.work, "tok.txt")).read().split()] == e
        results[-1]["tokenization"] = {"texts": len(texts), "identical_special_matched": agree["tokenize"],
                                       "identical_special_as_text": agree["tokenize_plain"]}
        print(results[-1], flush=True)
    json.dump(results, open(os.path.join(a.work, "results.json"), "w"), indent=1)
    print("| model | dtype | max rel. logit diff | argmax agree | PPL engine | PPL llama.cpp |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['model']} | {r['dtype']} | {r['max_rel']:.2e} | {r['argmax']:.3f} | {r['ppl_engine']:.3f} | "
              f"{r['ppl_llama']:.3f} |")
    for r in results:
        if "greedy" in r:
            print(r["model"], "greedy:", r["greedy"], "tokenization:", r["tokenization"])


def text_of(a, gguf_file, ids, env):
    """The prompt as text: the engine decodes the ids (the same ids come back when re-encoded for
    the texts these tests use; the check reports whether they did)."""
    return run([a.hymba, "tokenizer", "decode", "--tokenizer", gguf_file, "--ids", ",".join(map(str, ids))], env).rstrip("\n")


if __name__ == "__main__":
    main()
