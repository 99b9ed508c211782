#!/usr/bin/env python3
"""Peer check of the t5 (Unigram) tokenizer form against llama.cpp itself
(docs/gguf.md, "The tokenizer"). For each sentencepiece Unigram model:

  1. a tiny random Mamba checkpoint carrying the model (`hymba init`, the
     model copied in as tokenizer.model) is exported with
     `hymba export --format gguf`, which writes tokenizer.ggml.* in the t5 form
     (and the engine's own copy of the model);
  2. every text of tests/fixtures/tokenizers/texts.jsonl is tokenized by
     llama.cpp from that file (llama_peer tokenize_vocab: no bos/eos, special
     token text as text, as sentencepiece does) and by the engine from the same
     file (its own copy: sentencepiece's ids);
     (a Unigram tokenizer.json: the engine's HF pipeline);
  3. round trip: the same file without the engine's hymba.* keys (llama.cpp's
     keys alone) is read by the engine, and its ids are compared with the
     original tokenizer's and with llama.cpp's.

  /usr/bin/python3 tools/gguf_peer/t5_peer.py --hymba build/release/hymba \\
      --peer /tmp/llama_peer --libdir DIR/bins/linux-x64 --gguf-py DIR/gguf-py

Build llama_peer as llama_peer.c says. Needs python3-numpy (Debian) for gguf-py."""
import argparse, json, os, shutil, subprocess, sys, tempfile


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, errors="replace", **kw).stdout


def engine_ids(hymba, gguf_file, texts):
    out = run([hymba, "tokenizer", "encode", "--tokenizer", gguf_file, "--jsonl"],
              input="\n".join(json.dumps(t) for t in texts) + "\n")
    return [json.loads(l)["ids"] for l in out.splitlines()]


def llama_ids(a, gguf_file, texts, work, env):
    ids = []
    for t in texts:
        tf, of = os.path.join(work, "t.txt"), os.path.join(work, "o.txt")
        open(tf, "w", encoding="utf-8").write(t)
        run([a.peer, gguf_file, "tokenize_vocab", tf, of], env=env)
        ids.append([int(v) for v in open(of).read().split()])
    return ids


def strip_hymba_keys(gguf, src, dst):
    """The file's metadata without hymba.* keys (llama.cpp's form alone), tensors kept."""
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, r.fields["general.architecture"].contents())
    for name, f in r.fields.items():
        if name.startswith("hymba.") or name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = f.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            w.add_key_value(name, f.contents(), vtype, sub_type=f.types[-1])
        else:
            w.add_key_value(name, f.contents(), vtype)
    for t in r.tensors:
        w.add_tensor(t.name, t.data, raw_shape=list(reversed(t.shape.tolist())), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hymba", required=True)
    ap.add_argument("--peer", required=True)
    ap.add_argument("--libdir", required=True)
    ap.add_argument("--gguf-py", required=True)
    ap.add_argument("--texts", default="tests/fixtures/tokenizers/texts.jsonl")
    ap.add_argument("--models", nargs="*",
                    default=["tests/fixtures/gguf/t5_unigram.model", "tests/fixtures/tokenizers/spm_unigram/tokenizer.model",
                             "unigram-json-never"])
    a = ap.parse_args()
    sys.path.insert(0, a.gguf_py)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gguf_fixtures"))
    import gguf
    from make_t5_fixture import read_model

    env = dict(os.environ, LLAMA_PEER_LIBDIR=a.libdir, LD_LIBRARY_PATH=a.libdir)
    texts = [json.loads(l) for l in open(a.texts, encoding="utf-8") if l.strip()]
    work = tempfile.mkdtemp(prefix="t5_peer_")
    rows = []
    for model in a.models:
        ckpt = os.path.join(work, "ckpt")
        shutil.rmtree(ckpt, ignore_errors=True)
        if model == "unigram-json-never":
            # The Unigram tokenizer.json fixture with no normalizer and Metaspace(prepend never): a
            # pipeline llama.cpp's t5 form can express (tests/test_gguf_t5.cpp builds the same).
            j = json.load(open("tests/fixtures/tokenizers/unigram/tokenizer.json", encoding="utf-8"))
            j["normalizer"] = None
            j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never", "split": True}
            j["model"]["byte_fallback"] = False
            name, vocab = "tokenizer.json", len(j["model"]["vocab"])
            original = os.path.join(work, name)
            json.dump(j, open(original, "w", encoding="utf-8"), ensure_ascii=False)
        else:
            name, vocab = "tokenizer.model", len(read_model(model)[0])
            original = os.path.join(work, name)
            shutil.copy(model, original)
        run([a.hymba, "init", "--preset", "mamba-only", "--scale", "tiny", "--vocab-size", str(vocab), "--out", ckpt])
        shutil.copy(original, os.path.join(ckpt, name))
        full, only = os.path.join(work, "full.gguf"), os.path.join(work, "only.gguf")
        note = subprocess.run([a.hymba, "export", "--format", "gguf", "--dtype", "f32", "--ckpt", ckpt, "--out", full],
                              check=True, capture_output=True, text=True)
        note = note.stdout + note.stderr
        strip_hymba_keys(gguf, full, only)
        eng = engine_ids(a.hymba, original, texts)
        eng_file = engine_ids(a.hymba, full, texts)
        eng_t5 = engine_ids(a.hymba, only, texts)
        lcp = llama_ids(a, full, texts, work, env)
        lcp_only = llama_ids(a, only, texts, work, env)
        differ = [i for i in range(len(texts)) if lcp[i] != eng[i]]
        rows.append({
            "model": model, "texts": len(texts),
            "engine_file_equals_original": sum(x == y for x, y in zip(eng_file, eng)),
            "llama_cpp_equals_engine": sum(x == y for x, y in zip(lcp, eng)),
            "llama_cpp_same_on_t5_keys_alone": sum(x == y for x, y in zip(lcp_only, lcp)),
            "engine_t5_import_equals_original": sum(x == y for x, y in zip(eng_t5, eng)),
            "engine_t5_import_equals_llama_cpp": sum(x == y for x, y in zip(eng_t5, lcp_only)),
            "first_differences": [{"text": texts[i][:60], "engine": eng[i][:12], "llama_cpp": lcp[i][:12]}
                                  for i in differ[:3]],
            "export_notes": [l for l in note.splitlines() if "note" in l],
        })
        print(json.dumps(rows[-1], ensure_ascii=False, indent=1), flush=True)
    print("| model | texts | llama.cpp = engine | engine t5 import = original | engine t5 import = llama.cpp |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['texts']} | {r['llama_cpp_equals_engine']} | "
              f"{r['engine_t5_import_equals_original']} | {r['engine_t5_import_equals_llama_cpp']} |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
