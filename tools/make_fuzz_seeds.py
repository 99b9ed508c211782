#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer harnesses, fuzz/corpus/<harness>/
(docs/security.md): small valid files of every kind the engine reads, from
the test fixtures and written here by hand, plus the files only the engine
writes (sentencepiece models, a run's train_state.json and
optimizer.safetensors), made with the CLI given as --hymba.

    tools/make_fuzz_seeds.py --hymba build/release/hymba

The regression inputs of the defects issue 25 fixed are written too, named
regress-* (each also has a unit test in tests/test_security.cpp); they are
kept small (the unit tests use the full sizes: 100,000-deep JSON, 1,000,000
nested pickle tuples). Needs no torch.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import tempfile
import zipfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
FIX = os.path.join(ROOT, "tests", "fixtures")
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def put(harness, name, data):
    d = os.path.join(CORPUS, harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def fixture(*parts):
    with open(os.path.join(FIX, *parts), "rb") as f:
        return f.read()


# ------------------------------------------------------------ safetensors

def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, bytes)] in data order."""
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def f32(*v):
    return struct.pack("<%df" % len(v), *v)


def safetensors_seeds():
    put("safetensors", "f32_meta", safetensors(
        [("a.weight", "F32", [2, 2], f32(1, 2, 3, 4)), ("a.bias", "F32", [2], f32(0.5, -0.5))],
        {"format": "pt"}))
    put("safetensors", "half_types", safetensors(
        [("bf", "BF16", [3], struct.pack("<3H", 0x3F80, 0xC000, 0x0000)),
         ("f16", "F16", [1, 3], struct.pack("<3H", 0x3C00, 0xC000, 0x7BFF))]))
    put("safetensors", "ints_and_empty", safetensors(
        [("empty", "F32", [0, 4], b""), ("ids", "I64", [2], struct.pack("<2q", 7, -1)),
         ("mask", "BOOL", [3], b"\x01\x00\x01"), ("scalar", "F32", [], f32(3.0))]))
    put("safetensors", "state_spaces_mamba", fixture("import", "state_spaces_mamba", "model.safetensors"))


# ----------------------------------------------------------------- config

def config_seeds():
    put("config", "native_tiny_hybrid", fixture("tiny_hybrid", "config.json"))
    for d in ("hf_hymba", "hf_mamba", "state_spaces_mamba", "hymba_1_5b_config"):
        put("config", d, fixture("import", d, "config.json"))
    put("config", "native_separate_ratio", json.dumps({
        "vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 4, "layer_types": "hybrid",
        "num_attention_heads": 2, "num_key_value_heads": 1, "proj_style": "separate", "fusion": "learned_beta",
        "attn_mamba_ratio": [1, 1.35], "intermediate_size": 48, "sliding_window": 8, "global_attn_idx": [0, 3],
        "kv_reuse_group": "auto", "rope_type": "ntk", "max_position_embeddings": 64,
        "orig_max_position_embeddings": 16, "init_scheme": "mamba_ssm", "mamba_dt_rank": "auto"}))
    put("config", "native_blocks", json.dumps({
        "vocab_size": 32, "hidden_size": 16, "num_hidden_layers": 4,
        "layer_types": ["attention", "mamba", "attention", "mamba"], "num_attention_heads": 2,
        "num_key_value_heads": 2, "block_layers": 2, "block_link": "gated", "fusion": "concat",
        "tie_word_embeddings": False, "num_memory_tokens": 2, "rope": False}))


# -------------------------------------------------------------- tokenizers

def tokenizer_seeds():
    tok = fixture("import", "hf_mamba", "tokenizer.json")
    put("tokenizer_json", "hf_mamba", tok)
    j = json.loads(tok)
    j["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "NFKD"}]}
    j["pre_tokenizer"]["add_prefix_space"] = True
    j["model"]["merges"] = [m.split(" ") for m in j["model"]["merges"]]  # the list-of-pairs form
    put("tokenizer_json", "normalizer_pairs", json.dumps(j, separators=(",", ":")))
    put("tokenizer_config", "hf_mamba", fixture("import", "hf_mamba", "tokenizer_config.json"))
    put("tokenizer_config", "added_token_objects", json.dumps({
        "add_bos_token": True, "bos_token": {"content": "<|endoftext|>", "lstrip": False, "__type": "AddedToken"},
        "eos_token": {"content": "<|endoftext|>"}, "pad_token": None, "unk_token": "<|endoftext|>"}))
    put("tokenizer_config", "empty", "{}")


# --------------------------------------------------------------- pickles

def binunicode(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def long1(v):
    return b"\x8a\x08" + struct.pack("<q", v)


def tensor(storage_type, sizes, strides, key="0", numel=16, parameter=False):
    """_rebuild_tensor_v2((storage, type, key, cpu, numel), 0, sizes, strides, False, OrderedDict())."""
    pid = b"(" + binunicode("storage") + b"ctorch\n" + storage_type.encode() + b"\n" + binunicode(key) + \
          binunicode("cpu") + b"K" + bytes([numel]) + b"tQ"
    ints = lambda v: b"(" + b"".join(long1(x) for x in v) + b"t"
    t = b"ctorch._utils\n_rebuild_tensor_v2\n(" + pid + b"K\x00" + ints(sizes) + ints(strides) + \
        b"\x89ccollections\nOrderedDict\n)RtR"
    if parameter:
        t = b"ctorch._utils\n_rebuild_parameter\n(" + t + b"\x88}tR"
    return t


def torch_zip(pickle, storages):
    buf = tempfile.SpooledTemporaryFile()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pickle)
        for key, data in storages.items():
            z.writestr("archive/data/" + key, data)
        z.writestr("archive/version", "3\n")
    buf.seek(0)
    return buf.read()


def torch_seeds():
    # Mode byte 1: a data.pkl the harness stores in a zip beside storage "0" (64 bytes).
    plain = b"\x80\x02}(" + binunicode("w") + tensor("FloatStorage", [4, 4], [4, 1]) + \
            binunicode("b") + tensor("FloatStorage", [4], [1], parameter=True) + b"u."
    put("torch_checkpoint", "pkl_plain", b"\x01" + plain)
    wrapped = b"\x80\x02}(" + binunicode("state_dict") + b"ccollections\nOrderedDict\n)R(" + \
              binunicode("h") + tensor("HalfStorage", [2, 8], [8, 1], numel=32) + b"u" + \
              binunicode("epoch") + b"K\x03u."
    put("torch_checkpoint", "pkl_wrapped_half", b"\x01" + wrapped)
    memo = b"\x80\x02}q\x00(" + binunicode("x") + tensor("BFloat16Storage", [1, 32], [32, 1], numel=32) + \
           b"q\x01" + binunicode("y") + b"h\x01u."
    put("torch_checkpoint", "pkl_memo_shared", b"\x01" + memo)
    real = zipfile.ZipFile(os.path.join(FIX, "import", "state_spaces_mamba_bin", "pytorch_model.bin"))
    put("torch_checkpoint", "pkl_state_spaces", b"\x01" + real.read("pytorch_model/data.pkl"))
    # Mode byte 0: whole files.
    put("torch_checkpoint", "zip_plain", b"\x00" + torch_zip(plain, {"0": b"\x00" * 64}))
    put("torch_checkpoint", "zip_pickle_with_code", b"\x00" + fixture("import", "pickle_with_code", "pytorch_model.bin"))
    put("torch_checkpoint", "zip_wrapped", b"\x00" + fixture("import", "torch_save_wrapped", "pytorch_model.bin"))


# ------------------------------------------------------------------ serve

def serve_seeds():
    put("serve_request", "minimal", json.dumps({"prompt": "Hello"}))
    put("serve_request", "full", json.dumps({
        "model": "hymba", "prompt": ["a", "b"], "n": 2, "stream": True, "max_tokens": 8, "temperature": 0.7,
        "top_p": 0.9, "top_k": 40, "seed": 3, "stop": ["\n", "."]}))
    put("serve_request", "greedy_nulls", json.dumps({"prompt": "x", "temperature": 0, "stop": None, "n": None}))


# ------------------------------------------------- files the engine writes

def engine_seeds(hymba):
    work = tempfile.mkdtemp(prefix="hymba-seeds-")
    try:
        text = os.path.join(work, "text.txt")
        with open(text, "w") as f:
            for i in range(200):
                f.write("the quick brown fox %d jumps over the lazy dog; caf\u00e9 \u2581 na\u00efve\n" % i)
        for kind in ("bpe", "unigram"):
            out = os.path.join(work, kind + ".model")
            subprocess.run([hymba, "tokenizer", "train", "--type", kind, "--vocab-size", "300", "--data", text,
                            "--out", out], check=True, capture_output=True)
            with open(out, "rb") as f:
                put("sentencepiece", kind, f.read())
        # A two-step run of the model fuzz_optimizer_state.cpp declares
        # (the byte tokenizer: vocab 259): its train_state.json and moments.
        cfg = os.path.join(work, "cfg.json")
        with open(cfg, "w") as f:
            json.dump(OPTIMIZER_MODEL, f)
        run = os.path.join(work, "run")
        subprocess.run([hymba, "--threads", "1", "train", "--config", cfg, "--data", text, "--out", run, "--steps",
                        "2", "--batch", "2", "--seq-len", "8", "--quiet"], check=True, capture_output=True)
        with open(os.path.join(run, "latest")) as f:
            ckpt = os.path.join(run, f.read().strip())
        with open(os.path.join(ckpt, "train_state.json")) as f:
            state = json.load(f)
        state["run"]["data"] = "default"  # the recipe fuzz_train_state.cpp compares with
        put("train_state", "run", json.dumps(state, indent=2))
        with open(os.path.join(ckpt, "optimizer.safetensors"), "rb") as f:
            put("optimizer_state", "run", f.read())
    finally:
        shutil.rmtree(work)


# The model of fuzz/fuzz_optimizer_state.cpp (keep the two equal).
OPTIMIZER_MODEL = {"vocab_size": 259, "hidden_size": 8, "num_hidden_layers": 1, "layer_types": "hybrid",
                   "num_attention_heads": 2, "num_key_value_heads": 1, "mamba_d_state": 2, "mamba_expand": 1,
                   "intermediate_size": 8}


# ------------------------------------------------------------- regressions

def regression_seeds():
    deep = "[" * 2000 + "]" * 2000
    # safetensors: an element count that overflows int64, a zero-size one of a
    # huge shape (numel() multiplied unchecked), a header nested deep.
    put("safetensors", "regress-numel-overflow", safetensors([("t", "F32", [2147483648, 4294967296, 2], b"")]))
    put("safetensors", "regress-numel-zero-dim", safetensors([("t", "U8", [2147483648, 4294967296, 0], b"")]))
    text = ('{"t": %s}' % deep).encode()
    put("safetensors", "regress-deep-header", struct.pack("<Q", len(text)) + text)
    put("optimizer_state", "regress-numel-overflow", safetensors([("m.x", "F32", [2147483648, 4294967296, 0], b"")]))
    # config.json: overflowing translations, ratios, head counts, layer counts, deep values, long values.
    hf_mamba = json.loads(fixture("import", "hf_mamba", "config.json"))
    put("config", "regress-hf-mamba-expand", json.dumps(dict(hf_mamba, hidden_size=2**62, expand=4, intermediate_size=8)))
    put("config", "regress-state-spaces-vocab-pad", json.dumps({"d_model": 8, "n_layer": 1, "vocab_size": 2**63 - 1}))
    hymba = json.loads(fixture("import", "hf_hymba", "config.json"))
    put("config", "regress-hymba-conv-dim", json.dumps(dict(hymba, mamba_expand=2**62, conv_dim={"0": 8})))
    put("config", "regress-hymba-heads-int64-min", json.dumps(dict(hymba, hidden_size=-2**63, num_attention_heads=-1)))
    native = json.loads(fixture("tiny_hybrid", "config.json"))
    put("config", "regress-ratio-1e308", json.dumps(dict(native, proj_style="separate", fusion="mean",
                                                         attn_mamba_ratio=[1e308, 1e308], qk_head_dim=0, v_head_dim=0)))
    put("config", "regress-heads-2p62", json.dumps(dict(native, proj_style="separate", fusion="mean",
                                                        attn_mamba_ratio=[1, 1], num_attention_heads=2**62)))
    put("config", "regress-200000-layers", json.dumps({"num_hidden_layers": 200000, "layer_types": "mamba",
                                                       "num_attention_heads": 0}))
    put("config", "regress-deep", '{"hidden_size": %s}' % deep)
    put("config", "regress-long-value", json.dumps(dict(native, fusion="f" * 5000)))
    # tokenizer.json: an id that sized the piece table, fields read without type checks.
    tok = json.loads(fixture("import", "hf_mamba", "tokenizer.json"))
    big_id = json.loads(json.dumps(tok))
    big_id["model"]["vocab"]["<far>"] = 2**33
    put("tokenizer_json", "regress-id-2p33", json.dumps(big_id, separators=(",", ":")))
    for name, edit in (("regress-add-prefix-space-number", lambda j: j["pre_tokenizer"].update(add_prefix_space=1)),
                       ("regress-byte-fallback-number", lambda j: j["model"].update(byte_fallback=1)),
                       ("regress-decoder-use-regex-string", lambda j: j.update(decoder={"type": "ByteLevel",
                                                                                        "use_regex": "no"})),
                       ("regress-special-string", lambda j: j["added_tokens"][0].update(special="yes"))):
        j = json.loads(json.dumps(tok))
        edit(j)
        put("tokenizer_json", name, json.dumps(j, separators=(",", ":")))
    put("tokenizer_config", "regress-deep", '{"eos_token": %s}' % deep)
    put("tokenizer_config", "regress-token-object", json.dumps({"eos_token": {"content": 5}, "add_bos_token": 1}))
    # pickles (mode byte 1): stride products that overflow, deep nesting, a memo cycle, many objects.
    put("torch_checkpoint", "regress-stride-overflow", b"\x01\x80\x02}(" + binunicode("w") +
        tensor("FloatStorage", [2**62, 4], [4, 1]) + b"u.")
    put("torch_checkpoint", "regress-deep-tuples", b"\x01\x80\x02)" + b"\x85" * 20000 + b".")
    put("torch_checkpoint", "regress-memo-cycle", b"\x01\x80\x02]q\x00h\x00a.")
    put("torch_checkpoint", "regress-long-global", b"\x01\x80\x02c" + b"m" * 200 + b"\n" + b"n" * 200 + b"\n.")
    # train_state.json and request bodies nested deep, long values echoed.
    put("train_state", "regress-deep", '{"step": 1, "run": {"lr": %s}}' % deep)
    put("train_state", "regress-long-value", json.dumps({"step": "s" * 5000}))
    put("serve_request", "regress-deep", '{"prompt": %s}' % deep)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hymba", help="the hymba CLI, for the seeds only the engine writes")
    args = ap.parse_args()
    safetensors_seeds()
    config_seeds()
    tokenizer_seeds()
    torch_seeds()
    serve_seeds()
    regression_seeds()
    if args.hymba:
        engine_seeds(args.hymba)
    put("train_state", "minimal", json.dumps({
        "step": 1, "tokens": 16, "best_step": -1, "best_val_loss": None, "train_seconds": 0.5,
        "final_train_loss": 5.5, "final_val_loss": 5.6, "final_val_accuracy": 0.0,
        "run": {"data": "default", "lr": 0.001, "seed": 1234, "threads": 2, "init": ""}}))


if __name__ == "__main__":
    main()
