#!/usr/bin/env python3
"""Writes tests/fixtures/gguf/gguf_py_qwen2.gguf: the random Qwen2 checkpoint of
tests/fixtures/import/hf_qwen2 (tools/make_import_fixtures.py) as llama.cpp's
convert_hf_to_gguf.py writes a Qwen2ForCausalLM (arch qwen2, F32, Q/K/V
biases, rows as they are: llama.cpp's qwen2 graph rotates halves; tied head,
so no output.weight; the GPT-2 tokenizer.json as the gpt2 form with
tokenizer.ggml.pre "qwen2"), by llama.cpp's gguf-py, and expected_qwen2.json
with llama.cpp's logits (tools/gguf_peer/llama_peer.c, F32 KV cache) on the
first row of ids of hf_qwen2/expected.safetensors.

  python3 tools/gguf_fixtures/make_qwen2_fixture.py --gguf-py /tmp/llama-src/gguf-py \\
      --peer /tmp/llama_peer --libdir DIR/bins/linux-x64 \\
      --hf tests/fixtures/import/hf_qwen2 --out tests/fixtures/gguf
Needs python3-numpy (Debian)."""
import argparse, json, os, struct, subprocess, sys, tempfile

import numpy as np


def read_safetensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        raw = b[8 + n + s:8 + n + e]
        if v["dtype"] == "BF16":
            a = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif v["dtype"] == "F32":
            a = np.frombuffer(raw, dtype=np.float32)
        else:
            raise SystemExit(f"{path}: {k} has dtype {v['dtype']}")
        out[k] = a.reshape(v["shape"]).astype(np.float32)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf-py", required=True)
    ap.add_argument("--peer", required=True)
    ap.add_argument("--libdir", required=True)
    ap.add_argument("--hf", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    sys.path.insert(0, a.gguf_py)
    import gguf
    c = json.load(open(os.path.join(a.hf, "config.json")))
    W = read_safetensors(os.path.join(a.hf, "model.safetensors"))
    tok = json.load(open(os.path.join(a.hf, "tokenizer.json"), encoding="utf-8"))
    path = os.path.join(a.out, "gguf_py_qwen2.gguf")
    w = gguf.GGUFWriter(path, "qwen2")
    d, H, KV = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(d)
    w.add_block_count(c["num_hidden_layers"])
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    w.add_rope_freq_base(c["rope_theta"])
    w.add_layer_norm_rms_eps(c["rms_norm_eps"])
    w.add_file_type(0)
    vocab = {i: t for t, i in tok["model"]["vocab"].items()}
    special = {t["id"]: t for t in tok["added_tokens"]}
    for i, t in special.items():
        vocab[i] = t["content"]
    tokens = [vocab[i] for i in range(len(vocab))]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL for i in range(len(tokens))])
    w.add_token_merges(tok["model"]["merges"])
    w.add_bos_token_id(c["bos_token_id"])
    w.add_eos_token_id(c["eos_token_id"])
    w.add_tensor("token_embd.weight", W["model.embed_tokens.weight"])
    for l in range(c["num_hidden_layers"]):
        p, b = f"model.layers.{l}.", f"blk.{l}."
        w.add_tensor(b + "attn_norm.weight", W[p + "input_layernorm.weight"])
        for n, g in (("q", "attn_q"), ("k", "attn_k"), ("v", "attn_v")):
            w.add_tensor(b + g + ".weight", W[p + f"self_attn.{n}_proj.weight"])
            w.add_tensor(b + g + ".bias", W[p + f"self_attn.{n}_proj.bias"])
        w.add_tensor(b + "attn_output.weight", W[p + "self_attn.o_proj.weight"])
        w.add_tensor(b + "ffn_norm.weight", W[p + "post_attention_layernorm.weight"])
        w.add_tensor(b + "ffn_gate.weight", W[p + "mlp.gate_proj.weight"])
        w.add_tensor(b + "ffn_up.weight", W[p + "mlp.up_proj.weight"])
        w.add_tensor(b + "ffn_down.weight", W[p + "mlp.down_proj.weight"])
    w.add_tensor("output_norm.weight", W["model.norm.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    expected = read_safetensors(os.path.join(a.hf, "expected.safetensors"))
    ids = [int(v) for v in expected["ids"][0]]
    env = dict(os.environ, LLAMA_PEER_LIBDIR=a.libdir)
    with tempfile.TemporaryDirectory() as tmp:
        open(os.path.join(tmp, "ids.txt"), "w").write(" ".join(map(str, ids)))
        out = os.path.join(tmp, "logits.bin")
        subprocess.run([a.peer, path, "logits", os.path.join(tmp, "ids.txt"), out], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        logits = np.fromfile(out, dtype=np.float32).reshape(len(ids), -1)
    json.dump({"ids": ids, "logits": [[float("%.9g" % v) for v in row] for row in logits]},
              open(os.path.join(a.out, "expected_qwen2.json"), "w"))
    ref = expected["logits"][0]
    print(f"gguf_py_qwen2.gguf: {os.path.getsize(path)} bytes; llama.cpp vs float64 reference: max rel "
          f"{np.abs(logits - ref).max() / np.abs(ref).max():.2e}")


if __name__ == "__main__":
    main()
