#!/usr/bin/env python3
"""Writes the small GGUF vocabulary fixtures of tests/test_gguf_vocab.cpp from
llama.cpp's tokenizer test vocabularies (models/ggml-vocab-NAME.gguf with its
.inp/.out vectors, in the llama.cpp source bundle of the npm package
node-llama-cpp; never committed here), and the converter-style Mamba file.

For each vocabulary with vectors, the fixture keeps only the tokens its test
texts need: the ids llama.cpp gives the texts, every token those are built
from (for BPE every merge whose result is kept, closed under its parts; for
SPM every split of a kept piece into two tokens; WPM needs no more), the
byte tokens, the special ids and the control and user-defined tokens. A BPE
or SPM merge never applied on a text cannot change the tokens of that text,
and every merge that is applied is kept, so llama.cpp tokenizes the texts
identically on the reduced file; the script checks it (llama_peer
tokenize_vocab on each text) and writes llama.cpp's ids on the reduced file.

  python3 tools/gguf_fixtures/make_vocab_fixtures.py --gguf-py /tmp/llama-src/gguf-py \\
      --models /tmp/llama-src/models --peer /tmp/llama_peer --libdir DIR/bins/linux-x64 \\
      --out tests/fixtures/gguf/vocab

Files: NAME.gguf (tokenizer keys only, written by gguf-py) and NAME.json
({"texts", "ids", "source", "tokens", "source_tokens"}) per vocabulary, and
mamba_mpt.gguf + mamba_mpt.json (texts and llama.cpp's ids as above, then
"logit_ids" and llama.cpp's "logits" on them): a Mamba file as convert_hf_to_gguf.py writes
Mamba-130M (arch mamba, the GPT-NeoX vocabulary with tokenizer.ggml.pre
"mpt" padded to a multiple of 8 with [PAD] tokens, A stored as -exp(A_log),
conv1d squeezed, tied head), F32 random weights, with llama.cpp's logits on
fixed ids and its ids on the mpt texts. Needs python3-numpy (Debian)."""
import argparse, glob, json, os, subprocess, sys, tempfile

import numpy as np

SEP = "\n__ggml_vocab_test__\n"
SPECIAL_KEYS = ["bos_token_id", "eos_token_id", "unknown_token_id", "seperator_token_id", "padding_token_id",
                "cls_token_id", "mask_token_id", "eot_token_id", "eom_token_id"]
DROP_KEYS = {"tokenizer.chat_template", "tokenizer.chat_templates", "tokenizer.chat_template.tool_use",
             "tokenizer.chat_template.rag", "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
             "tokenizer.ggml.token_type", "tokenizer.ggml.merges"}


def read_vectors(inp):
    raw = open(inp, "rb").read().decode("utf-8")
    texts, pos = [], 0
    while pos < len(raw):
        nxt = raw.find(SEP, pos)
        if nxt < 0:
            texts.append(raw[pos:])
            break
        texts.append(raw[pos:nxt])
        pos = nxt + len(SEP)
    lines = open(inp[: -len(".inp")] + ".out", encoding="utf-8").read().split("\n")
    return texts, [[int(t) for t in l.split()] for l in lines[: len(texts)]]


def field_value(gguf, f):
    t = f.types[0]
    if t == gguf.GGUFValueType.ARRAY:
        sub = f.types[-1]
        if sub == gguf.GGUFValueType.STRING:
            return [bytes(f.parts[i]) for i in f.data], t, sub
        return [f.parts[i].tolist()[0] for i in f.data], t, sub
    if t == gguf.GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8"), t, None
    return f.parts[f.data[0]].tolist()[0], t, None


def closure(model, tokens, merges, needed):
    """Token strings the needed ones are built from."""
    have = set(tokens)
    keep = set(needed)
    work = list(needed)
    if model in ("gpt2", "gemma4"):
        by_result = {}
        for m in merges:
            sp = m.find(b" ", 1)
            l, r = m[:sp], m[sp + 1:]
            by_result.setdefault(l + r, []).append((l, r))
        while work:
            t = work.pop()
            for l, r in by_result.get(t, []):
                for p in (l, r):
                    if p not in keep:
                        keep.add(p)
                        work.append(p)
    elif model == "llama":
        while work:
            t = work.pop()
            s = t.decode("utf-8", "surrogatepass")
            for k in range(1, len(s)):
                l, r = s[:k].encode(), s[k:].encode()
                if l in have and r in have:
                    for p in (l, r):
                        if p not in keep:
                            keep.add(p)
                            work.append(p)
    return keep


def peer_ids(args, path, texts):
    env = dict(os.environ, LLAMA_PEER_LIBDIR=args.libdir)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for t in texts:
            tin, tout = os.path.join(tmp, "t.txt"), os.path.join(tmp, "o.txt")
            open(tin, "wb").write(t.encode("utf-8"))
            subprocess.run([args.peer, path, "tokenize_vocab", tin, tout], check=True, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            out.append([int(v) for v in open(tout).read().split()])
    return out


def reduce_vocab(gguf, src, texts, expected, pad_to=0):
    """The reduced tokenizer of `src`: (kv list, tokens, types, scores, merges, id map)."""
    r = gguf.GGUFReader(src)
    kv = {}
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name in DROP_KEYS:
            continue
        kv[name] = field_value(gguf, f)
    tokens = field_value(gguf, r.fields["tokenizer.ggml.tokens"])[0]
    types = field_value(gguf, r.fields["tokenizer.ggml.token_type"])[0]
    scores = field_value(gguf, r.fields["tokenizer.ggml.scores"])[0] if "tokenizer.ggml.scores" in r.fields else None
    merges = field_value(gguf, r.fields["tokenizer.ggml.merges"])[0] if "tokenizer.ggml.merges" in r.fields else []
    model = kv["tokenizer.ggml.model"][0]
    keep_ids = {i for ids in expected for i in ids}
    for k in SPECIAL_KEYS:
        if "tokenizer.ggml." + k in kv:
            keep_ids.add(int(kv["tokenizer.ggml." + k][0]))
    for i, t in enumerate(types):
        if t in (2, 3, 4, 6):  # unknown, control, user-defined, byte
            keep_ids.add(i)
    if model == "gpt2":  # GPT-2's 256 byte characters
        byte_chars = {chr(c).encode() for c in list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))}
        byte_chars |= {chr(256 + n).encode() for n in range(68)}
        keep_ids |= {i for i, t in enumerate(tokens) if t in byte_chars}
    needed = {tokens[i] for i in keep_ids}
    keep = closure(model, tokens, merges, needed)
    kept = [i for i, t in enumerate(tokens) if t in keep or i in keep_ids]
    new_id = {old: new for new, old in enumerate(kept)}
    kept_set = {tokens[i] for i in kept}
    new_merges = []
    for m in merges:
        sp = m.find(b" ", 1)
        l, rr = m[:sp], m[sp + 1:]
        if l in kept_set and rr in kept_set and l + rr in kept_set:
            new_merges.append(m)
    for k in SPECIAL_KEYS:
        key = "tokenizer.ggml." + k
        if key in kv:
            v, t, s = kv[key]
            kv[key] = (new_id[int(v)], t, s)
    out_tokens = [tokens[i] for i in kept]
    out_types = [types[i] for i in kept]
    out_scores = [scores[i] for i in kept] if scores is not None else None
    return kv, out_tokens, out_types, out_scores, new_merges, new_id, len(tokens)


def write_vocab(gguf, path, kv, tokens, types, scores, merges, arch=None):
    w = gguf.GGUFWriter(path, arch or kv["general.architecture"][0])
    for name, (v, t, s) in kv.items():
        if name == "general.architecture":
            continue
        if t == gguf.GGUFValueType.ARRAY:
            w.add_key_value(name, v, t, sub_type=s)
        else:
            w.add_key_value(name, v, t)
    w.add_token_list(tokens)
    w.add_token_types(types)
    if scores is not None:
        w.add_token_scores(scores)
    if merges:
        w.add_token_merges(merges)
    return w


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def mamba_mpt(gguf, args, texts, expected):
    """A converter-style Mamba-130M file (small dimensions) on the reduced mpt vocabulary."""
    kv, tokens, types, scores, merges, new_id, _ = reduce_vocab(
        gguf, os.path.join(args.models, "ggml-vocab-mpt.gguf"), texts, expected)
    kv = {k: v for k, v in kv.items() if k.startswith("tokenizer.") or k == "general.architecture"}
    # convert_hf_to_gguf pads the vocabulary to a multiple of 8 with [PAD{i}] (UNUSED) tokens.
    while len(tokens) % 8:
        tokens.append(f"[PAD{len(tokens)}]".encode())
        types.append(5)
    path = os.path.join(args.out, "mamba_mpt.gguf")
    w = write_vocab(gguf, path, kv, tokens, types, None, merges, arch="mamba")
    rng = np.random.default_rng(20261128)
    d, layers, inner, state, rank, conv = 32, 2, 64, 16, 2, 4
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
    w.add_file_type(0)
    f = lambda *shape, s=0.1: (rng.standard_normal(shape) * s).astype(np.float32)
    w.add_tensor("token_embd.weight", f(len(tokens), d, s=0.5))
    for l in range(layers):
        b = f"blk.{l}."
        w.add_tensor(b + "attn_norm.weight", (1 + f(d)).astype(np.float32))
        w.add_tensor(b + "ssm_in.weight", f(2 * inner, d))
        w.add_tensor(b + "ssm_conv1d.weight", f(inner, 1, conv, s=0.3).squeeze())  # [d_inner, 1, k] squeezed
        w.add_tensor(b + "ssm_conv1d.bias", f(inner))
        w.add_tensor(b + "ssm_x.weight", f(rank + 2 * state, inner))
        w.add_tensor(b + "ssm_dt.weight", f(inner, rank, s=0.3))
        w.add_tensor(b + "ssm_dt.bias", (f(inner) - 3).astype(np.float32))
        a_log = np.log(np.tile(np.arange(1, state + 1, dtype=np.float32), (inner, 1)))  # S4D-real init, as Mamba's
        w.add_tensor(b + "ssm_a", (-np.exp(a_log + f(inner, state, s=0.05))).astype(np.float32))
        w.add_tensor(b + "ssm_d", (1 + f(inner)).astype(np.float32))
        w.add_tensor(b + "ssm_out.weight", f(d, inner))
    w.add_tensor("output_norm.weight", (1 + f(d)).astype(np.float32))
    finish(w)
    ids = [int(v) for v in rng.integers(0, len(tokens), 12)]
    env = dict(os.environ, LLAMA_PEER_LIBDIR=args.libdir)
    with tempfile.TemporaryDirectory() as tmp:
        open(os.path.join(tmp, "ids.txt"), "w").write(" ".join(map(str, ids)))
        out = os.path.join(tmp, "logits.bin")
        subprocess.run([args.peer, path, "logits", os.path.join(tmp, "ids.txt"), out], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        logits = np.fromfile(out, dtype=np.float32).reshape(len(ids), -1)
    sample = [0, 1, 5, 9, 13, 30, 38]  # texts: plain, spaces, newlines, digits, unicode
    mapped = [[new_id[i] for i in expected[k]] for k in sample]
    got = peer_ids(args, path, [texts[k] for k in sample])
    assert got == mapped, "llama.cpp's ids on the reduced mpt vocabulary differ from the full one's"
    json.dump({"texts": [texts[k] for k in sample], "ids": got, "logit_ids": ids,
               "logits": [[float("%.9g" % v) for v in row] for row in logits]},
              open(os.path.join(args.out, "mamba_mpt.json"), "w"))
    print(f"mamba_mpt.gguf: {len(tokens)} tokens, {os.path.getsize(path)} bytes")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf-py", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--peer", required=True)
    ap.add_argument("--libdir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    sys.path.insert(0, args.gguf_py)
    import gguf
    os.makedirs(args.out, exist_ok=True)
    for inp in sorted(glob.glob(os.path.join(args.models, "ggml-vocab-*.gguf.inp"))):
        src = inp[: -len(".inp")]
        name = os.path.basename(src)[len("ggml-vocab-"): -len(".gguf")]
        if args.names and name not in args.names:
            continue
        texts, expected = read_vectors(inp)
        kv, tokens, types, scores, merges, new_id, n_src = reduce_vocab(gguf, src, texts, expected)
        path = os.path.join(args.out, name + ".gguf")
        finish(write_vocab(gguf, path, kv, tokens, types, scores, merges))
        mapped = [[new_id[i] for i in ids] for ids in expected]
        got = peer_ids(args, path, texts)
        bad = sum(1 for a, b in zip(got, mapped) if a != b)
        assert bad == 0, f"{name}: llama.cpp tokenizes {bad} texts differently on the reduced file"
        json.dump({"source": os.path.basename(src), "source_tokens": n_src, "tokens": len(tokens), "texts": texts,
                   "ids": got}, open(os.path.join(args.out, name + ".json"), "w", encoding="utf-8"), ensure_ascii=False)
        print(f"{name}: {len(tokens)} of {n_src} tokens, {len(merges)} merges, {os.path.getsize(path)} bytes")
        if name == "mpt":
            mamba_mpt(gguf, args, texts, expected)


if __name__ == "__main__":
    main()
