#!/usr/bin/python3
"""Inference speed of hymba.cpp per weight format against a PyTorch peer, on the CPU.

One call times both sides on the same threads:

  * hymba: `hymba --threads N bench infer --json` once per format in
    --formats (f32, bf16, q8, q4), on --ckpt DIR (a float32 checkpoint) or
    on a held checkpoint from `hymba quantize` given as FORMAT=DIR in
    --held; or on --preset NAME (random weights) when no --ckpt is given;
  * PyTorch (Debian's torch, float32, eager, torch.no_grad): the official
    fused hybrid layer of bench/train_speed.py with the same matrix shapes
    as the model (hidden size, layers, heads, Mamba inner size and state,
    FFN, vocabulary), random weights, decoding one token at a time with a
    KV cache and the Mamba conv and SSM states, as a user's own PyTorch
    reference of the layers would run. Its caches start filled with
    --prompt-len + meta-token positions of random keys and values.

The peer does not share KV between layers or window its attention: every
layer keeps its own keys and values, so it reads a little more per token
than the engine (stated in the output). It times prefill as one forward
over a --prompt-len prompt (the chunked parallel scan) and decode as
--new-tokens steps after two warm-up steps.

Needs Debian's python3-torch (torch 1.13; `scripts/setup.sh --peers` installs it), hence /usr/bin/python3:
  bench/infer_speed.py --ckpt /path/to/hymba-1.5b --held q8=/path/q8,q4=/path/q4
  bench/infer_speed.py --preset hymba-125m --formats f32,q8 --json
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_speed as peer  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORMATS = ("f32", "bf16", "q8", "q4")


def peer_config(hymba_config):
    """The peer's config: the model's shapes as one kind of fused hybrid layer."""
    c = dict(peer.DEFAULTS)
    c.update({k: v for k, v in hymba_config.items() if k in peer.DEFAULTS})
    d, H = c["hidden_size"], c["num_attention_heads"]
    c["kind"] = "hybrid"
    c["d_inner"] = c["mamba_expand"] * d
    if c["mamba_dt_rank"] == "auto":
        c["mamba_dt_rank"] = math.ceil(d / 16)
    c["qk_head_dim"] = c["qk_head_dim"] or d // H
    c["v_head_dim"] = c["v_head_dim"] or c["d_inner"] // H
    return c


class Decoder:
    """Cached decoding through peer.LM's hybrid layers, one token per step."""

    def __init__(self, model, c, past):
        self.m, self.c = model, c
        H, Hkv, dqk, dv = c["num_attention_heads"], c["num_key_value_heads"], c["qk_head_dim"], c["v_head_dim"]
        di, N, K = c["d_inner"], c["mamba_d_state"], c["mamba_d_conv"]
        self.k = [torch.randn(1, Hkv, past, dqk) * 0.1 for _ in model.layers]
        self.v = [torch.randn(1, Hkv, past, dv) * 0.1 for _ in model.layers]
        self.conv = [torch.zeros(1, di, K) for _ in model.layers]
        self.ssm = [torch.zeros(1, di, N) for _ in model.layers]
        self.neg_a = [-torch.exp(layer.mamba.A_log) for layer in model.layers]
        self.pos = past
        self.H, self.Hkv = H, Hkv

    def rope(self, x):  # x: [1, H, 1, D] at position self.pos
        D = x.shape[-1]
        inv = self.c["rope_theta"] ** (-torch.arange(0, D, 2, dtype=torch.float32) / D)
        ang = self.pos * inv
        cos, sin = torch.cat([ang.cos(), ang.cos()]), torch.cat([ang.sin(), ang.sin()])
        h = D // 2
        return x * cos + torch.cat([-x[..., h:], x[..., :h]], -1) * sin

    def step(self, token):
        x = self.m.embed_tokens(torch.tensor([[token]]))
        for i, layer in enumerate(self.m.layers):
            mb = layer.mamba
            q, k, v, xs, z = mb.in_proj(layer.input_layernorm(x)).split(layer.split, -1)
            q, k = self.rope(peer.split_heads(q, self.H)), self.rope(peer.split_heads(k, self.Hkv))
            self.k[i] = torch.cat([self.k[i], k], 2)
            self.v[i] = torch.cat([self.v[i], peer.split_heads(v, self.Hkv)], 2)
            kk = self.k[i].repeat_interleave(self.H // self.Hkv, 1)
            vv = self.v[i].repeat_interleave(self.H // self.Hkv, 1)
            scores = torch.matmul(q, kk.transpose(-1, -2)) / math.sqrt(q.shape[-1])
            attn = peer.merge_heads(torch.matmul(scores.softmax(-1), vv))
            # Mamba: the conv's shift register, then one step of the scan.
            conv = torch.cat([self.conv[i][..., 1:], xs.transpose(1, 2)], -1)
            self.conv[i] = conv
            u = (conv * mb.conv1d.weight.squeeze(1)).sum(-1)
            if mb.conv1d.bias is not None:
                u = u + mb.conv1d.bias
            u = F.silu(u)  # [1, di]
            dt, Bm, Cm = mb.x_proj(u).split([mb.R, mb.N, mb.N], -1)
            delta = F.softplus(mb.dt_proj(dt))  # [1, di]
            self.ssm[i] = torch.exp(delta[..., None] * self.neg_a[i]) * self.ssm[i] + \
                (delta * u)[..., None] * Bm[:, None, :]
            y = (self.ssm[i] * Cm[:, None, :]).sum(-1) + mb.D * u
            y = (y * F.silu(z[:, 0])).unsqueeze(1)
            x = x + mb.out_proj((mb.pre_avg_layernorm1(attn) + mb.pre_avg_layernorm2(y)) * 0.5)
            if layer.ffn is not None:
                x = x + layer.ffn(layer.pre_moe_layernorm(x))
        self.pos += 1
        logits = F.linear(self.m.final_layernorm(x), self.m.embed_tokens.weight)
        return int(logits[0, -1].argmax())


def torch_run(c, args):
    torch.manual_seed(1234)
    model = peer.LM(c, args.chunk).eval()
    params = sum(p.numel() for p in model.parameters())
    out = {"params": params}
    with torch.no_grad():
        ids = torch.randint(0, c["vocab_size"], (1, args.prompt_len))
        model(ids, ids)  # warm-up
        t0 = time.perf_counter()
        model(ids, ids)
        out["prefill_tokens_per_s"] = args.prompt_len / (time.perf_counter() - t0)
        dec = Decoder(model, c, args.prompt_len + c.get("num_memory_tokens", 0))
        token = 1
        for _ in range(2):
            token = dec.step(token)
        t0 = time.perf_counter()
        for _ in range(args.new_tokens):
            token = dec.step(token)
        s = time.perf_counter() - t0
    out["decode_tokens_per_s_batch1"] = args.new_tokens / s
    out["decode_ms_per_token"] = 1e3 * s / args.new_tokens
    return out


def hymba_run(fmt, args):
    cmd = [args.hymba, "--threads", str(args.threads), "bench", "infer", "--json", "--batch", str(args.batch),
           "--prompt-len", str(args.prompt_len), "--new-tokens", str(args.new_tokens),
           "--contexts", args.contexts]
    held = dict(kv.split("=", 1) for kv in args.held.split(",") if kv) if args.held else {}
    if fmt in held:
        cmd += ["--ckpt", held[fmt]]
    elif args.ckpt:
        cmd += ["--ckpt", args.ckpt, "--weights", fmt]
    else:
        cmd += ["--preset", args.preset, "--weights", fmt]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"hymba bench infer failed ({' '.join(cmd)}):\n{r.stderr.strip()}")
    return json.loads(r.stdout)


def hymba_config(args):
    if args.ckpt:
        with open(os.path.join(args.ckpt, "config.json")) as f:
            return json.load(f)
    r = subprocess.run([args.hymba, "info", "--preset", args.preset, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"hymba info --preset {args.preset} failed: {r.stderr.strip()}")
    info = json.loads(r.stdout)
    return info.get("config", info)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", help="float32 checkpoint directory (else --preset, random weights)")
    ap.add_argument("--preset", default="hymba-1.5b", help="preset when no --ckpt (default hymba-1.5b)")
    ap.add_argument("--held", default="", help="FORMAT=DIR,...: held checkpoints from `hymba quantize`")
    ap.add_argument("--formats", default="f32,bf16,q8,q4", help="hymba weight formats (default all four)")
    ap.add_argument("--threads", type=int, default=2, help="threads on both sides (default 2)")
    ap.add_argument("--prompt-len", type=int, default=64, help="prompt tokens (default 64)")
    ap.add_argument("--new-tokens", type=int, default=16, help="timed decode steps (default 16)")
    ap.add_argument("--batch", type=int, default=16, help="hymba's batched decode (default 16)")
    ap.add_argument("--contexts", default="64,256,1024", help="hymba's prefill/decode contexts (default 64,256,1024)")
    ap.add_argument("--chunk", type=int, default=64, help="the peer's scan chunk (default 64)")
    ap.add_argument("--hymba", default=os.path.join(REPO, "build", "release", "hymba"), help="hymba binary")
    ap.add_argument("--skip-torch", action="store_true", help="hymba only")
    ap.add_argument("--json", action="store_true", help="print JSON")
    args = ap.parse_args()
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    for f in formats:
        if f not in FORMATS:
            ap.error(f"--formats: unknown format '{f}' (have {', '.join(FORMATS)})")
    if min(args.threads, args.prompt_len, args.new_tokens, args.batch, args.chunk) < 1:
        ap.error("--threads, --prompt-len, --new-tokens, --batch and --chunk must be >= 1")
    if not os.access(args.hymba, os.X_OK):
        ap.error(f"--hymba: {args.hymba} is not an executable (build it first)")
    torch.set_num_threads(args.threads)
    peer.tune_malloc()

    rows = []
    for fmt in formats:
        print(f"  hymba {fmt} ...", file=sys.stderr)
        rows.append({"side": "hymba", "format": fmt, **hymba_run(fmt, args)})
    result = {"threads": args.threads, "rows": rows}
    if not args.skip_torch:
        print("  torch f32 ...", file=sys.stderr)
        result["torch"] = torch_run(peer_config(hymba_config(args)), args)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"threads {args.threads}; prompt {args.prompt_len}; decode steps {args.new_tokens}")
    print(f"{'side':8} {'format':6} {'decode b1':>10} {'b' + str(args.batch):>8} {'GB/token':>9} {'bw limit':>9} "
          f"{'% bw':>5} {'peak RSS':>9} {'load s':>7}  prefill tok/s by context")
    for r in rows:
        prefill = ", ".join(f"{c['context']}: {c['prefill_tokens_per_s']:.1f}" for c in r["contexts"])
        print(f"{'hymba':8} {r['weights']:6} {r['decode_tokens_per_s_batch1']:10.2f} "
              f"{r['decode_tokens_per_s_batch']:8.2f} {r['decode_bytes_per_token'] / 1e9:9.3f} "
              f"{r['bandwidth_limit_tokens_per_s']:9.2f} {100 * r['decode_share_of_bandwidth']:5.0f} "
              f"{r['peak_rss_bytes'] / 1e9:8.2f}G {r['load_s']:7.1f}  {prefill}")
    if "torch" in result:
        t = result["torch"]
        print(f"{'torch':8} {'f32':6} {t['decode_tokens_per_s_batch1']:10.2f} {'':>8} "
              f"{4 * t['params'] / 1e9:9.3f} {'':>9} {'':>5} {'':>9} {'':>7}  "
              f"{args.prompt_len}: {t['prefill_tokens_per_s']:.1f} (one forward, no meta tokens)")


if __name__ == "__main__":
    main()
