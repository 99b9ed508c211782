#!/usr/bin/env python3
"""Writes the t5 (Unigram) tokenizer fixture of tests/test_gguf_t5.cpp with an
independent writer, llama.cpp's pure-Python gguf-py (from the git bundle of the
npm package node-llama-cpp; never committed here), the way llama.cpp's
convert_hf_to_gguf.py writes a T5 tokenizer (conversion/t5.py): tokens,
scores and types of the sentencepiece model, add_space_prefix,
remove_extra_whitespaces and the normalizer's precompiled charsmap. The file
has no tensors (llama arch hyper-parameters only, so that llama.cpp can load
its vocabulary), and records llama.cpp's own ids for a few texts
(tools/gguf_peer/llama_peer.c, mode tokenize_vocab).

  /usr/bin/python3 tools/gguf_fixtures/make_t5_fixture.py --gguf-py DIR/gguf-py \\
      --model tests/fixtures/gguf/t5_unigram.model --peer /tmp/llama_peer \\
      --libdir DIR/bins/linux-x64 --out tests/fixtures/gguf

Writes gguf_py_t5.gguf and expected_t5.json. Needs python3-numpy (Debian)."""
import argparse, json, os, struct, subprocess, sys, tempfile

TEXTS = [
    "Hello world, the theory of everything!",
    "  two  spaces\tand tab\n",
    "naïve café 12345",
    "日本語のテキスト 🎉",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ and ﬁ ligature",
    "line one\nline two\r\nline three",
    "",
    "   ",
    "e\u0301 decomposed accent",
    "</s> is text here",
]


def varint(b, p):
    v, shift = 0, 0
    while True:
        c = b[p]
        p += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, p


def fields(b):
    """(number, wire, value) of a protobuf message; value is int, bytes or float."""
    p, out = 0, []
    while p < len(b):
        key, p = varint(b, p)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, p = varint(b, p)
        elif wire == 2:
            n, p = varint(b, p)
            v, p = b[p:p + n], p + n
        elif wire == 5:
            v, p = struct.unpack("<f", b[p:p + 4])[0], p + 4
        elif wire == 1:
            v, p = b[p:p + 8], p + 8
        else:
            raise ValueError("bad wire type")
        out.append((num, wire, v))
    return out


def read_model(path):
    pieces, trainer, norm = [], {}, {}
    for num, _, v in fields(open(path, "rb").read()):
        if num == 1:
            f = {n: x for n, _, x in fields(v)}
            pieces.append((f[1].decode("utf-8"), f.get(2, 0.0), f.get(3, 1)))
        elif num == 2:
            trainer = {n: x for n, _, x in fields(v)}
        elif num == 3:
            norm = {n: x for n, _, x in fields(v)}
    return pieces, trainer, norm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf-py", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--peer", required=True)
    ap.add_argument("--libdir", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    sys.path.insert(0, a.gguf_py)
    import gguf

    pieces, trainer, norm = read_model(a.model)
    path = os.path.join(a.out, "gguf_py_t5.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(64)
    w.add_embedding_length(8)
    w.add_block_count(1)
    w.add_feed_forward_length(16)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("t5")
    w.add_tokenizer_pre("default")
    w.add_token_list([p[0] for p in pieces])
    w.add_token_scores([p[1] for p in pieces])
    w.add_token_types([p[2] for p in pieces])
    w.add_add_space_prefix(bool(norm.get(3, 1)))
    w.add_remove_extra_whitespaces(bool(norm.get(4, 1)))
    if norm.get(2):
        w.add_precompiled_charsmap(norm[2])
    w.add_unk_token_id(trainer.get(40, 0))
    w.add_eos_token_id(trainer.get(42, 2))
    w.add_pad_token_id(trainer.get(43, 0))
    w.add_bos_token_id(trainer.get(41, 1))
    w.add_add_bos_token(False)
    w.add_add_eos_token(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    env = dict(os.environ, LD_LIBRARY_PATH=a.libdir)
    ids = []
    with tempfile.TemporaryDirectory() as tmp:
        for t in TEXTS:
            tf, of = os.path.join(tmp, "t.txt"), os.path.join(tmp, "o.txt")
            open(tf, "w", encoding="utf-8").write(t)
            subprocess.run([a.peer, path, "tokenize_vocab", tf, of], env=env, check=True, capture_output=True)
            ids.append([int(v) for v in open(of).read().split()])
    json.dump({"texts": TEXTS, "llama_cpp_ids": ids}, open(os.path.join(a.out, "expected_t5.json"), "w"),
              ensure_ascii=False, indent=1)
    print("wrote", path)


if __name__ == "__main__":
    main()
