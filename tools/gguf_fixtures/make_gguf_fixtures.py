#!/usr/bin/env python3
"""Writes the GGUF fixtures of tests/test_gguf.cpp with an independent writer:
llama.cpp's pure-Python gguf-py (it ships in the git bundle of the npm package
node-llama-cpp; never committed here), and records what llama.cpp itself
computes on them (tools/gguf_peer/llama_peer.c against the prebuilt CPU
library of @node-llama-cpp/linux-x64).

  python3 tools/gguf_fixtures/make_gguf_fixtures.py --gguf-py DIR/gguf-py \
      --peer /tmp/llama_peer --libdir DIR/bins/linux-x64 --out tests/fixtures/gguf

Files (all small, seeded):
  gguf_py_llama.gguf       llama arch, F32, GQA 4/2, untied head, gpt2 tokenizer
  gguf_py_mamba.gguf       mamba arch, tensors in F16, BF16, Q8_0 and Q4_0, tied head
  gguf_py_quant_probe.gguf no arch: float rows and gguf-py's Q4_0 / Q8_0 of them
  expected.json            llama.cpp's logits on fixed ids for both models, its ids
                           for a few texts, and gguf-py's dequantized values (first 128 of each
                           non-F32 tensor)
Needs python3-numpy (Debian)."""
import argparse, json, os, subprocess, sys, tempfile

import numpy as np


def byte_level_chars():
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    out, n = {}, 0
    for b in range(256):
        if b in printable:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return [out[b] for b in range(256)]


def tokenizer(gguf, w):
    chars = byte_level_chars()
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a"), ("e", "r"), ("o", "n"), ("Ġ", "s")]
    tokens = chars + [a + b for a, b in merges] + ["<|endoftext|>"]
    types = [gguf.TokenType.NORMAL] * (len(tokens) - 1) + [gguf.TokenType.CONTROL]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([f"{a} {b}" for a, b in merges])
    w.add_bos_token_id(len(tokens) - 1)
    w.add_eos_token_id(len(tokens) - 1)
    return len(tokens)


def llama(gguf, path, rng):
    w = gguf.GGUFWriter(path, "llama")
    d, layers, heads, kv, ff = 64, 2, 4, 2, 128
    hd = d // heads
    w.add_context_length(256)
    w.add_embedding_length(d)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(0)
    vocab = tokenizer(gguf, w)
    f = lambda *shape, s=0.1: (rng.standard_normal(shape) * s).astype(np.float32)
    w.add_tensor("token_embd.weight", f(vocab, d, s=0.5))
    for l in range(layers):
        b = f"blk.{l}."
        w.add_tensor(b + "attn_norm.weight", (1 + f(d)).astype(np.float32))
        w.add_tensor(b + "attn_q.weight", f(heads * hd, d))
        w.add_tensor(b + "attn_k.weight", f(kv * hd, d))
        w.add_tensor(b + "attn_v.weight", f(kv * hd, d))
        w.add_tensor(b + "attn_output.weight", f(d, heads * hd))
        w.add_tensor(b + "ffn_norm.weight", (1 + f(d)).astype(np.float32))
        w.add_tensor(b + "ffn_gate.weight", f(ff, d))
        w.add_tensor(b + "ffn_up.weight", f(ff, d))
        w.add_tensor(b + "ffn_down.weight", f(d, ff))
    w.add_tensor("output_norm.weight", (1 + f(d)).astype(np.float32))
    w.add_tensor("output.weight", f(vocab, d, s=0.3))
    finish(w)


def mamba(gguf, path, rng, dequantized):
    Q = gguf.GGMLQuantizationType
    w = gguf.GGUFWriter(path, "mamba")
    d, layers, inner, state, rank, conv = 64, 2, 128, 16, 4, 4
    w.add_context_length(1 << 20)
    w.add_embedding_length(d)
    w.add_feed_forward_length(0)
    w.add_head_count(0)
    w.add_block_count(layers)
    w.add_ssm_conv_kernel(conv)
    w.add_ssm_inner_size(inner)
    w.add_ssm_state_size(state)
    w.add_ssm_time_step_rank(rank)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_ssm_dt_b_c_rms(False)
    w.add_file_type(7)
    vocab = tokenizer(gguf, w)
    f = lambda *shape, s=0.1: (rng.standard_normal(shape) * s).astype(np.float32)

    def add(name, values, qtype):
        if qtype == Q.F32:
            w.add_tensor(name, values)
            return
        if qtype == Q.F16:
            data = values.astype(np.float16)
            w.add_tensor(name, data)
            back = data.astype(np.float32)
        else:
            data = gguf.quants.quantize(values, qtype)
            w.add_tensor(name, data, raw_dtype=qtype)
            back = gguf.quants.dequantize(data, qtype).astype(np.float32)
        dequantized[name] = [float(v) for v in back.reshape(-1)[:128]]  # the first rows: enough to pin the layout

    add("token_embd.weight", f(vocab, d, s=0.5), Q.F16)
    for l in range(layers):
        b = f"blk.{l}."
        add(b + "attn_norm.weight", (1 + f(d)).astype(np.float32), Q.F32)
        add(b + "ssm_in.weight", f(2 * inner, d), Q.Q8_0)
        add(b + "ssm_conv1d.weight", f(inner, conv, s=0.3), Q.F32)
        add(b + "ssm_conv1d.bias", f(inner), Q.F32)
        add(b + "ssm_x.weight", f(rank + 2 * state, inner), Q.Q4_0)
        add(b + "ssm_dt.weight", f(inner, rank, s=0.3), Q.BF16 if l == 0 else Q.F16)
        add(b + "ssm_dt.bias", (f(inner) - 3).astype(np.float32), Q.F32)
        add(b + "ssm_a", (-np.exp(f(inner, state, s=0.5))).astype(np.float32), Q.F32)
        add(b + "ssm_d", (1 + f(inner)).astype(np.float32), Q.F32)
        add(b + "ssm_out.weight", f(d, inner), Q.Q4_0)
    add("output_norm.weight", (1 + f(d)).astype(np.float32), Q.F32)
    finish(w)


def probe(gguf, path, rng):
    Q = gguf.GGMLQuantizationType
    w = gguf.GGUFWriter(path, "probe")
    x = (rng.standard_normal((8, 96)) * np.array([0.01, 1, 100] * 32)).astype(np.float32)
    x[3, :32] = 0  # a zero block
    x[5, 40] = 7.5  # a block whose largest magnitude is positive
    w.add_tensor("rows.f32", x)
    w.add_tensor("rows.q4_0", gguf.quants.quantize(x, Q.Q4_0), raw_dtype=Q.Q4_0)
    w.add_tensor("rows.q8_0", gguf.quants.quantize(x, Q.Q8_0), raw_dtype=Q.Q8_0)
    finish(w)


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def peer(args, model, mode, inp, out, *extra):
    env = dict(os.environ, LLAMA_PEER_LIBDIR=args.libdir)
    subprocess.run([args.peer, model, mode, inp, *extra, out], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


TEXTS = ["the theater in the north", "Hello, world!\nthe end", "  spaces  and\ttabs there",
         "naïve café 123 <|endoftext|> ok"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf-py", required=True)
    ap.add_argument("--peer", required=True)
    ap.add_argument("--libdir", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    sys.path.insert(0, args.gguf_py)
    import gguf
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(20241126)
    dequantized = {}
    paths = {k: os.path.join(args.out, f"gguf_py_{k}.gguf") for k in ("llama", "mamba", "quant_probe")}
    llama(gguf, paths["llama"], rng)
    mamba(gguf, paths["mamba"], rng, dequantized)
    probe(gguf, paths["quant_probe"], rng)
    ids = [int(v) for v in rng.integers(0, 265, 8)]
    expected = {"ids": ids, "dequantized": dequantized, "texts": TEXTS, "logits": {}, "text_ids": []}
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "ids.txt"), "w") as fh:
            fh.write(" ".join(map(str, ids)))
        for k in ("llama", "mamba"):
            out = os.path.join(tmp, k + ".bin")
            peer(args, paths[k], "logits", os.path.join(tmp, "ids.txt"), out)
            expected["logits"][k] = [[float("%.9g" % v) for v in row] for row in np.fromfile(out, dtype=np.float32).reshape(len(ids), -1)]
        for t in TEXTS:
            with open(os.path.join(tmp, "t.txt"), "w", encoding="utf-8") as fh:
                fh.write(t)
            peer(args, paths["llama"], "tokenize", os.path.join(tmp, "t.txt"), os.path.join(tmp, "ids_out.txt"))
            expected["text_ids"].append([int(v) for v in open(os.path.join(tmp, "ids_out.txt")).read().split()])
    with open(os.path.join(args.out, "expected.json"), "w") as fh:
        json.dump(expected, fh)
    print("wrote", ", ".join(sorted(os.listdir(args.out))))


if __name__ == "__main__":
    main()
