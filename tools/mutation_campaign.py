#!/usr/bin/env python3
"""Seeded mutation campaign through the real CLI (docs/security.md).

Mutates the files the engine reads from untrusted sources -- checkpoint
directories, published HF / state-spaces layouts (config.json, safetensors
and their index, pytorch_model.bin), tokenizer.json, tokenizer_config.json,
sentencepiece and byte tokenizer files, and a run directory being resumed
(train_state.json, optimizer.safetensors, latest, the checkpoint's weights) --
and runs the commands that read them (`info`, `forward`, `generate`,
`import`, `tokenizer encode`, `train --resume`), normally under the
ASan + UBSan build, each with a timeout and with its peak memory measured.
Every run is classified:

  clean      exit 1 with one short line "hymba: error: ..." naming a file
  accepted   exit 0 (the mutation left a valid file, or one the command
             does not read)
  sanitizer  an AddressSanitizer / LeakSanitizer / UBSan report
  crash      killed by a signal, or an exit status other than 0, 1, 2
  hang       still running after --timeout seconds (killed)
  memory     peak RSS above --max-rss-mb
  unclear    an error that says "internal error", spans several lines, is
             longer than --max-message characters, or names no file

Inputs of every class but clean and accepted are kept under OUT/findings/.
Figures go to OUT/summary.json and OUT/runs.csv.

    nice -n 19 tools/mutation_campaign.py --hymba build/fuzz/hymba --runs 10000 --seed 1 --out /tmp/campaign

Same seed, same mutations: a finding is reproduced by --only N.
"""
import argparse
import csv
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
FIX = os.path.join(ROOT, "tests", "fixtures")

INTERESTING_INTS = [0, -1, 1, 2, 7, 8, 255, 256, 65535, 65536, 2**31 - 1, 2**31, 2**32, 2**33, 2**40, 2**53,
                    2**62, 2**63 - 1, 2**63, 2**64 - 1, -(2**63), -(2**31)]
INTERESTING_FLOATS = [0.0, -0.0, 1e-308, 5e-324, 1e308, 1.7976931348623157e308, -1e308, 0.5, 1e30]


# ------------------------------------------------------------ fixtures

def run_ok(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit("campaign: setup command failed: %s\n%s" % (" ".join(cmd), r.stdout + r.stderr))
    return r


def build_fixtures(hymba, work):
    """Base directories, each a set of files the mutations start from."""
    text = os.path.join(work, "text.txt")
    with open(text, "w") as f:
        for i in range(300):
            f.write("the quick brown fox %d jumps over the lazy dog, caf\u00e9 na\u00efve\n" % i)
    cfg = os.path.join(work, "tiny.json")
    shutil.copy(os.path.join(FIX, "tiny_hybrid", "config.json"), cfg)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    # A run directory (byte tokenizer) to resume, and its checkpoint.
    run = os.path.join(work, "base", "run")
    run_ok([hymba, "--threads", "1", "train", "--config", cfg, "--data", text, "--out", run, "--steps", "2",
            "--batch", "2", "--seq-len", "16", "--quiet"], env=env)
    # A checkpoint with a sentencepiece BPE tokenizer.
    sp_run = os.path.join(work, "sp_run")
    run_ok([hymba, "--threads", "1", "train", "--config", cfg, "--data", text, "--out", sp_run, "--steps", "1",
            "--batch", "2", "--seq-len", "16", "--tokenizer-type", "bpe", "--tokenizer-vocab", "300", "--quiet"],
           env=env)
    with open(os.path.join(sp_run, "latest")) as f:
        shutil.copytree(os.path.join(sp_run, f.read().strip()), os.path.join(work, "base", "sp_ckpt"))
    with open(os.path.join(run, "latest")) as f:
        shutil.copytree(os.path.join(run, f.read().strip()), os.path.join(work, "base", "ckpt"))
    for d in ("hf_hymba", "hf_mamba", "state_spaces_mamba", "state_spaces_mamba_bin", "torch_save_wrapped",
              "hf_gpt_neo", "hf_gpt_neo_bin"):
        shutil.copytree(os.path.join(FIX, "import", d), os.path.join(work, "base", d))
        for extra in ("expected.safetensors",):
            p = os.path.join(work, "base", d, extra)
            if os.path.exists(p):
                os.remove(p)
    # Published layouts without a tokenizer get the hf_mamba one (generate needs one).
    for d in ("hf_hymba", "state_spaces_mamba", "state_spaces_mamba_bin", "torch_save_wrapped", "hf_gpt_neo_bin"):
        shutil.copy(os.path.join(FIX, "import", "hf_mamba", "tokenizer.json"), os.path.join(work, "base", d))
        tc = os.path.join(work, "base", d, "tokenizer_config.json")
        if os.path.exists(tc):
            os.remove(tc)
    return text, cfg


def targets(work, text, cfg):
    """(base dir, file to mutate, kind, [commands]) where commands use {D} for the case directory."""
    gen = ["generate", "--ckpt", "{D}", "--prompt", "hello world", "--max-new-tokens", "3", "--seed", "1"]
    fwd = ["forward", "--ckpt", "{D}", "--ids", "1,2,3;4,5,6", "--out", "{D}/fwd.safetensors"]
    imp = ["import", "--in", "{D}", "--out", "{D}.imported"]
    enc = lambda f: ["tokenizer", "encode", "--tokenizer", "{D}/" + f, "--text", "Hello, world! caf\u00e9 123"]
    resume = ["train", "--config", cfg, "--data", text, "--out", "{D}", "--steps", "3", "--batch", "2", "--seq-len",
              "16", "--quiet", "--resume"]
    t = [
        ("ckpt", "config.json", "json", [["info", "--config", "{D}/config.json"], gen, fwd]),
        ("ckpt", "model.safetensors", "safetensors", [gen, fwd]),
        ("ckpt", "tokenizer.model", "bytes", [enc("tokenizer.model"), gen]),
        ("sp_ckpt", "tokenizer.model", "bytes", [enc("tokenizer.model"), gen]),
        ("hf_hymba", "config.json", "json", [imp, ["info", "--config", "{D}/config.json"]]),
        ("hf_hymba", "model.safetensors", "safetensors", [imp]),
        ("hf_hymba", "tokenizer.json", "json", [enc("tokenizer.json"), gen]),
        ("hf_mamba", "config.json", "json", [imp]),
        ("hf_mamba", "model.safetensors.index.json", "json", [imp]),
        ("hf_mamba", "model-00001-of-00002.safetensors", "safetensors", [imp]),
        ("hf_mamba", "tokenizer.json", "json", [enc("tokenizer.json"), gen]),
        ("hf_mamba", "tokenizer_config.json", "json", [gen]),
        ("state_spaces_mamba", "config.json", "json", [imp, gen]),
        ("state_spaces_mamba_bin", "pytorch_model.bin", "torch", [imp]),
        ("torch_save_wrapped", "pytorch_model.bin", "torch", [imp]),
        ("hf_gpt_neo", "config.json", "json", [imp, gen]),
        ("hf_gpt_neo", "model.safetensors", "safetensors", [imp]),
        ("hf_gpt_neo", "tokenizer.json", "json", [enc("tokenizer.json"), gen]),
        ("hf_gpt_neo_bin", "pytorch_model.bin", "torch", [imp]),
        ("run", "ckpt-2/train_state.json", "json", [resume]),
        ("run", "ckpt-2/optimizer.safetensors", "safetensors", [resume]),
        ("run", "ckpt-2/config.json", "json", [resume]),
        ("run", "ckpt-2/model.safetensors", "safetensors", [resume]),
        ("run", "latest", "bytes", [resume, gen]),
    ]
    return t


# ------------------------------------------------------------ mutators

def mutate_bytes(rng, data):
    b = bytearray(data)
    for _ in range(rng.choice([1, 1, 1, 2, 3, 8])):
        op = rng.randrange(8)
        if not b:
            b += bytes([rng.randrange(256)])
            continue
        i = rng.randrange(len(b))
        if op == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[i] = rng.choice([0, 0xFF, 0x7F, 0x80, 0x20, ord("{"), ord("["), ord("\""), ord("9")])
        elif op == 2:
            del b[i:i + rng.randrange(1, 64)]
        elif op == 3:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))
        elif op == 4:
            del b[i:]
        elif op == 5 and len(b) > 8:
            j = rng.randrange(len(b))
            chunk = b[j:j + rng.randrange(1, 256)]
            b[i:i] = chunk * rng.choice([1, 2, 64])
        elif op == 6 and i + 8 <= len(b):
            b[i:i + 8] = struct.pack("<Q", rng.choice([x % 2**64 for x in INTERESTING_INTS]))
        else:
            b[i:i + 4] = struct.pack("<I", rng.choice([0, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 1, 64]))
    return bytes(b)


def paths_of(v, prefix=()):
    yield prefix
    if isinstance(v, dict):
        for k, x in v.items():
            yield from paths_of(x, prefix + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from paths_of(x, prefix + (i,))


def get_at(v, path):
    for p in path:
        v = v[p]
    return v


def set_at(v, path, x):
    if not path:
        return x
    get_at(v, path[:-1])[path[-1]] = x
    return v


def hostile_value(rng, old):
    r = rng.randrange(14)
    if r == 0:
        return rng.choice(INTERESTING_INTS)
    if r == 1:
        return rng.choice(INTERESTING_FLOATS)
    if r == 2:
        return rng.choice([True, False, None, "", "auto", "h", "ByteLevel", "Sequence", "NFC", "<unk>"])
    if r == 3:
        return "x" * rng.choice([300, 5000, 300000])
    if r == 4:
        depth = rng.choice([200, 5000, 100000])
        return "\x00DEEP%d\x00" % depth  # replaced by raw nesting after dumping
    if r == 5:
        return [] if rng.random() < 0.5 else {}
    if r == 6:
        return [old] * rng.choice([2, 1000])
    if r == 7:
        return {"type": rng.choice(["ByteLevel", "Sequence", "NFKC", "BPE", "X"]), "use_regex": rng.choice([1, "no", None]),
                "normalizers": [{"type": "Sequence", "normalizers": []}]}
    if r == 8 and isinstance(old, (int, float)) and not isinstance(old, bool):
        return old * rng.choice([-1, 2, 1024, 2**40]) if isinstance(old, int) else old * 1e300
    if r == 9 and isinstance(old, str):
        return old + rng.choice(["\n", "\\", "/../..", "\xff", "\u2581", "/" * 300, "c" * 10000])
    if r == 10:
        return rng.choice([2**33, 2**30 - 1, 2**31, 200000, 4097, 1 << 20])
    if r == 11:
        return [rng.choice(INTERESTING_INTS) for _ in range(rng.choice([1, 2, 3]))]
    if r == 12:
        return rng.choice([1, 2]) if isinstance(old, bool) else (not old if isinstance(old, bool) else True)
    return rng.choice(INTERESTING_INTS + [1.5, "1", [1], {"a": 1}])


def mutate_json_value(rng, j):
    paths = list(paths_of(j))
    for _ in range(rng.choice([1, 1, 2, 3])):
        p = rng.choice(paths)
        op = rng.randrange(5)
        parent = get_at(j, p[:-1]) if p else None
        if op == 0 and p and isinstance(parent, dict):
            del parent[p[-1]]
            paths = list(paths_of(j))
        elif op == 1 and isinstance(get_at(j, p), dict):
            get_at(j, p)[rng.choice(["unknown_key", "x" * 400, "hidden_size", "vocab", "special", "type"])] = \
                hostile_value(rng, None)
        else:
            j = set_at(j, p, hostile_value(rng, get_at(j, p)))
            paths = list(paths_of(j))
    return j


def dump_json(rng, j):
    text = json.dumps(j, ensure_ascii=rng.random() < 0.5)
    def deep(m):
        n = int(m.group(1))
        return "[" * n + "]" * n
    text = re.sub(r'"\\u0000DEEP(\d+)\\u0000"', deep, text)
    if rng.random() < 0.05:  # a duplicate key
        text = text.replace("{", '{"dup": 1, "dup": 2, ', 1)
    return text.encode()


def mutate_json(rng, data):
    if rng.random() < 0.25:
        return mutate_bytes(rng, data)
    try:
        j = json.loads(data)
    except ValueError:
        return mutate_bytes(rng, data)
    return dump_json(rng, mutate_json_value(rng, j))


def mutate_safetensors(rng, data):
    if rng.random() < 0.3 or len(data) < 8:
        return mutate_bytes(rng, data)
    n = struct.unpack("<Q", data[:8])[0]
    try:
        header = json.loads(data[8:8 + n])
    except ValueError:
        return mutate_bytes(rng, data)
    body = data[8 + n:]
    r = rng.random()
    names = [k for k in header if k != "__metadata__"]
    if r < 0.5 and names:
        e = header[rng.choice(names)]
        field = rng.choice(["shape", "data_offsets", "dtype"])
        if field == "dtype":
            e["dtype"] = rng.choice(["F32", "BF16", "F16", "F64", "I64", "BOOL", "F8_E4M3", "X", 3])
        elif e.get(field):
            lst = e[field]
            lst[rng.randrange(len(lst))] = rng.choice(INTERESTING_INTS)
            if rng.random() < 0.2:
                lst.append(rng.choice(INTERESTING_INTS))
        else:
            e[field] = [rng.choice(INTERESTING_INTS) for _ in range(rng.choice([1, 2, 3]))]
    else:
        header = mutate_json_value(rng, header)
    text = dump_json(rng, header)
    length = len(text) if rng.random() < 0.9 else rng.choice([x % 2**64 for x in INTERESTING_INTS])
    return struct.pack("<Q", length) + text + body


def mutate_pickle(rng, pkl):
    b = bytearray(pkl)
    r = rng.random()
    if r < 0.3:  # an integer operand (sizes, strides, offsets, lengths)
        for m in re.finditer(rb"K(.)|M(..)|J(....)", bytes(b)):
            if rng.random() < 0.05:
                v = rng.choice(INTERESTING_INTS)
                b[m.start():m.end()] = b"\x8a\x08" + struct.pack("<Q", v % 2**64)
                break
    elif r < 0.4:  # deep nesting
        n = rng.choice([1000, 1000000])
        b = bytearray(b"\x80\x02)" + b"\x85" * n + b".") if rng.random() < 0.5 else \
            bytearray(b"\x80\x02" + b"(" * n + b"t" * n + b".")
    elif r < 0.45:  # a global that is not allowed
        b[2:2] = b"cos\nsystem\n"
    else:
        return mutate_bytes(rng, bytes(b))
    return bytes(b)


def mutate_torch(rng, data, path):
    if rng.random() < 0.3:
        return mutate_bytes(rng, data)
    try:
        src = zipfile.ZipFile(path)
        pkl_name = next(n for n in src.namelist() if n.endswith("/data.pkl"))
        out = tempfile.SpooledTemporaryFile()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
            for info in src.infolist():
                d = src.read(info.filename)
                if info.filename == pkl_name:
                    d = mutate_pickle(rng, d)
                dst.writestr(info.filename, d)
        out.seek(0)
        return out.read()
    except (zipfile.BadZipFile, StopIteration, KeyError):
        return mutate_bytes(rng, data)


def mutate(rng, kind, data, path):
    if kind == "json":
        return mutate_json(rng, data)
    if kind == "safetensors":
        return mutate_safetensors(rng, data)
    if kind == "torch":
        return mutate_torch(rng, data, path)
    return mutate_bytes(rng, data)


# ------------------------------------------------------------ running

SANITIZER = re.compile(r"ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|SUMMARY: \w*Sanitizer|"
                       r"AddressSanitizer:DEADLYSIGNAL|ThreadSanitizer|MemorySanitizer")
NAMES_FILE = re.compile(r"(/|\.json|\.safetensors|\.bin|\.model|latest|--\w)")


def classify(code, out, hung, rss_mb, args):
    if hung:
        return "hang"
    if SANITIZER.search(out):
        return "sanitizer"
    if rss_mb > args.max_rss_mb:
        return "memory"
    if code < 0 or code not in (0, 1, 2):
        return "crash"
    if code == 0:
        return "accepted"
    lines = [l for l in out.splitlines() if l.startswith("hymba: ")]
    msg = lines[-1] if lines else out.strip().splitlines()[-1] if out.strip() else ""
    if "internal error" in out or not msg.startswith("hymba: error: ") or len(msg) > args.max_message or \
            not NAMES_FILE.search(msg):
        return "unclear"
    return "clean"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hymba", default=os.path.join(ROOT, "build", "fuzz", "hymba"))
    ap.add_argument("--runs", type=int, default=1000, help="mutated files to run (each through its commands)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--max-rss-mb", type=float, default=2048.0)
    ap.add_argument("--max-message", type=int, default=300)
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", type=int, default=None, help="run only mutation number N (to reproduce a finding)")
    args = ap.parse_args()
    out_dir = args.out or tempfile.mkdtemp(prefix="hymba-campaign-")
    os.makedirs(os.path.join(out_dir, "findings"), exist_ok=True)
    work = tempfile.mkdtemp(prefix="hymba-campaign-work-")
    text, cfg = build_fixtures(args.hymba, work)
    tlist = targets(work, text, cfg)
    base_env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="passive", HYMBA_MAX_MEMORY="2G",
                    ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:allocator_may_return_null=1",
                    UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1")
    counts = {k: 0 for k in ("clean", "accepted", "sanitizer", "crash", "hang", "memory", "unclear")}
    rows = []
    t0 = time.time()
    indices = [args.only] if args.only is not None else range(args.runs)

    def one(i):
        rng = random.Random(args.seed * 1000003 + i)
        base, rel, kind, cmds = tlist[rng.randrange(len(tlist))]
        case = os.path.join(work, "case%d" % i)
        shutil.copytree(os.path.join(work, "base", base), case)
        target = os.path.join(case, rel)
        with open(target, "rb") as f:
            data = f.read()
        mutated = mutate(rng, kind, data, target)
        with open(target, "wb") as f:
            f.write(mutated)
        results = []
        for cmd in cmds:
            # /usr/bin/time gives this run's own peak RSS (KiB).
            timefile = case + ".time"
            code, out, hung, secs = run_case_timed(args.hymba, cmd, case, args.timeout, base_env, timefile)
            rss_mb = read_rss_mb(timefile)
            cls = classify(code, out, hung, rss_mb, args)
            results.append((i, base, rel, cmd[0], cls, code, round(secs, 2), round(rss_mb, 1),
                            out.strip().splitlines()[-1][:300] if out.strip() else ""))
            if cls not in ("clean", "accepted"):
                keep = os.path.join(out_dir, "findings", "%06d-%s-%s" % (i, cls, rel.replace("/", "_")))
                with open(keep, "wb") as f:
                    f.write(mutated)
                with open(keep + ".log", "w") as f:
                    f.write(" ".join(cmd) + "\n" + out)
        shutil.rmtree(case, ignore_errors=True)
        shutil.rmtree(case + ".imported", ignore_errors=True)
        for p in (case + ".time",):
            if os.path.exists(p):
                os.remove(p)
        return results

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        done = 0
        for results in pool.map(one, indices):
            for r in results:
                counts[r[4]] += 1
                rows.append(r)
            done += 1
            if done % 200 == 0:
                print("campaign: %d/%d files, %d runs, %.0f s: %s" % (done, len(indices), len(rows), time.time() - t0,
                                                                     counts), flush=True)
    with open(os.path.join(out_dir, "runs.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["mutation", "fixture", "file", "command", "class", "exit", "seconds", "peak_rss_mb", "last_line"])
        w.writerows(rows)
    by_target = {}
    for r in rows:
        key = "%s/%s" % (r[1], r[2])
        by_target.setdefault(key, {}).setdefault(r[4], 0)
        by_target[key][r[4]] += 1
    summary = {"seed": args.seed, "mutated_files": len(indices), "runs": len(rows), "seconds": round(time.time() - t0),
               "counts": counts, "by_target": by_target, "hymba": args.hymba,
               "max_peak_rss_mb": max([r[7] for r in rows] or [0]), "max_seconds": max([r[6] for r in rows] or [0])}
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(json.dumps(summary, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    bad = sum(counts[k] for k in ("sanitizer", "crash", "hang", "memory", "unclear"))
    return 1 if bad else 0


def run_case_timed(hymba, cmd, case_dir, timeout, env, timefile):
    """run_case under /usr/bin/time -f %M (peak RSS of this run alone)."""
    argv = ["/usr/bin/time", "-o", timefile, "-f", "%M", hymba, "--threads", "1"] + \
           [a.replace("{D}", case_dir) for a in cmd]
    start = time.time()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        hung = False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        hung = True
    text = out.decode("utf-8", "replace")
    code = p.returncode
    # /usr/bin/time exits with the command's status; a signal it reports in
    # its output file as "Command terminated by signal N".
    try:
        with open(timefile) as f:
            m = re.search(r"Command terminated by signal (\d+)", f.read())
        if m:
            code = -int(m.group(1))
    except OSError:
        pass
    return code, text, hung, time.time() - start


def read_rss_mb(timefile):
    try:
        with open(timefile) as f:
            lines = [l for l in f.read().split() if l.isdigit()]
        return int(lines[-1]) / 1024.0 if lines else 0.0
    except OSError:
        return 0.0


if __name__ == "__main__":
    sys.exit(main())
