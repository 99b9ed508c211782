#!/usr/bin/env python3
"""Runs llama.cpp's tokenizer test vectors against the engine (docs/gguf.md).

llama.cpp ships test vocabularies as models/ggml-vocab-NAME.gguf with
NAME.gguf.inp (texts separated by "\\n__ggml_vocab_test__\\n") and
NAME.gguf.out (one line of ids per text, tokenized without bos/eos and with
special-token text as text), read by its tests/test-tokenizer-0.cpp. They are
in the llama.cpp source bundle of the npm package node-llama-cpp
(node_modules/node-llama-cpp/llama/gitRelease.bundle; `git clone` it).

For every vocabulary with vectors (or the files named), the engine reads the
GGUF file (`hymba tokenizer encode --tokenizer FILE.gguf --jsonl`) and its ids
are compared with llama.cpp's text by text. Prints one line per vocabulary
(matches / texts, or the engine's one-line refusal) and, with --show, the
texts that differ.

  python3 tools/gguf_peer/vocab_vectors.py --hymba build/release/hymba \\
      --models /tmp/llama-src/models [--show] [NAME ...]

Also reads the small fixtures of tests/fixtures/gguf/vocab/ (--fixtures DIR),
whose .json files hold the texts and llama.cpp's ids for their reduced files.
"""
import argparse, glob, json, os, subprocess, sys

SEP = "\n__ggml_vocab_test__\n"


def read_vectors(inp, out):
    raw = open(inp, "rb").read().decode("utf-8")
    texts, pos = [], 0
    while pos < len(raw):
        nxt = raw.find(SEP, pos)
        if nxt < 0:
            texts.append(raw[pos:])
            break
        texts.append(raw[pos:nxt])
        pos = nxt + len(SEP)
    ids = [[int(t) for t in line.split()] for line in open(out, encoding="utf-8").read().split("\n")]
    ids = ids[: len(texts)]
    if len(ids) != len(texts):
        raise SystemExit(f"{out}: {len(ids)} lines for {len(texts)} texts")
    return texts, ids


def engine_ids(hymba, gguf, texts):
    stdin = "".join(json.dumps(t) + "\n" for t in texts)
    # --jsonl skips blank lines only; every text is a JSON string, so none is blank.
    p = subprocess.run([hymba, "tokenizer", "encode", "--tokenizer", gguf, "--jsonl"], input=stdin,
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
    return [json.loads(l)["ids"] for l in p.stdout.splitlines() if l.strip()], ""


def report(name, texts, expected, hymba, gguf, show):
    got, err = engine_ids(hymba, gguf, texts)
    if got is None:
        print(f"{name:28s} refused: {err}")
        return name, 0, len(texts), err
    same = sum(1 for a, b in zip(got, expected) if a == b)
    print(f"{name:28s} {same:3d} / {len(texts):3d}")
    if show:
        for t, a, b in zip(texts, got, expected):
            if a != b:
                print(f"    text {json.dumps(t)[:80]}\n      engine    {a[:24]}\n      llama.cpp {b[:24]}")
    return name, same, len(texts), ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hymba", required=True)
    ap.add_argument("--models", help="llama.cpp's models/ directory (ggml-vocab-*.gguf with .inp/.out)")
    ap.add_argument("--fixtures", help="a directory of reduced vocabularies (NAME.gguf + NAME.json)")
    ap.add_argument("--show", action="store_true", help="print the texts that differ")
    ap.add_argument("--json-out", help="write the per-vocabulary counts as JSON")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    rows = []
    if a.models:
        for inp in sorted(glob.glob(os.path.join(a.models, "ggml-vocab-*.gguf.inp"))):
            gguf = inp[: -len(".inp")]
            name = os.path.basename(gguf)[len("ggml-vocab-"): -len(".gguf")]
            if a.names and name not in a.names:
                continue
            texts, ids = read_vectors(inp, gguf + ".out")
            rows.append(report(name, texts, ids, a.hymba, gguf, a.show))
    if a.fixtures:
        for js in sorted(glob.glob(os.path.join(a.fixtures, "*.json"))):
            name = os.path.basename(js)[: -len(".json")]
            if a.names and name not in a.names:
                continue
            fx = json.load(open(js, encoding="utf-8"))
            rows.append(report(name + " (fixture)", fx["texts"], fx["ids"], a.hymba,
                               os.path.join(a.fixtures, name + ".gguf"), a.show))
    if not rows:
        raise SystemExit("no vectors found (--models or --fixtures)")
    total = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"{'all':28s} {total[0]:3d} / {total[1]:3d}")
    if a.json_out:
        json.dump([{"name": n, "match": m, "texts": t, "error": e} for n, m, t, e in rows], open(a.json_out, "w"),
                  indent=1)
    return 0 if total[0] == total[1] else 1


if __name__ == "__main__":
    sys.exit(main())
