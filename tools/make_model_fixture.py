#!/usr/bin/python3
"""Writes a golden fixture for tests/test_fixture.cpp (llm.c style).

An independent PyTorch (float64, autograd) implementation of the Hymba
architecture reads a hymba.cpp checkpoint (config.json + model.safetensors,
written by `hymba init`), runs fixed token ids and targets, and writes the
logits, the loss and every parameter gradient to expected.safetensors.

Needs Debian's python3-torch; only used to (re)generate the committed fixture:
  build/release/hymba init --config tests/fixtures/tiny_hybrid/config.json \
      --out tests/fixtures/tiny_hybrid --seed 7
  tools/make_model_fixture.py tests/fixtures/tiny_hybrid
"""
import json
import math
import struct
import sys

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", (name, e["dtype"])
        b, end = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[base + b:base + end]), dtype=torch.float32)
        out[name] = t.reshape(e["shape"]).to(torch.float64)
    return out


DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def to_bytes(t, dtype):
    t = t.detach().to(DTYPES[dtype]).contiguous()
    # numpy has no bfloat16: write its bits
    return (t.view(torch.int16) if dtype == "BF16" else t).numpy().tobytes()


def write_safetensors(path, tensors, dtype="F32", metadata=None):
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        raw = to_bytes(t, dtype)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, theta):
    # x: [B, S, H, D], rotate-half with positions 0..S-1
    D = x.shape[-1]
    inv = theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    pos = torch.arange(x.shape[1], dtype=torch.float64)
    ang = pos[:, None] * inv[None, :]
    cos, sin = ang.cos()[None, :, None, :], ang.sin()[None, :, None, :]
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


def attention(q, k, v, window, num_meta):
    # q: [B,S,Hq,dqk], k: [B,S,Hkv,dqk], v: [B,S,Hkv,dv]
    B, S, Hq, dqk = q.shape
    rep = Hq // k.shape[2]
    k = k.repeat_interleave(rep, 2)
    v = v.repeat_interleave(rep, 2)
    scores = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(dqk)
    i = torch.arange(S)[:, None]
    j = torch.arange(S)[None, :]
    visible = j <= i
    if window > 0:
        visible = visible & ((i - j < window) | (j < num_meta))
    scores = scores.masked_fill(~visible, float("-inf"))
    p = scores.softmax(-1)
    return torch.einsum("bhij,bjhd->bihd", p, v).reshape(B, S, -1)


def mamba(c, W, pre, x, z):
    di, N, R, K = x.shape[-1], c["mamba_d_state"], c["mamba_dt_rank"], c["mamba_d_conv"]
    B, S, _ = x.shape
    conv = F.conv1d(x.transpose(1, 2), W[pre + "conv1d.weight"], W.get(pre + "conv1d.bias"), padding=K - 1, groups=di)
    u = F.silu(conv[..., :S].transpose(1, 2))
    xdbl = u @ W[pre + "x_proj.0.weight"].T
    dt, Bm, Cm = xdbl[..., :R], xdbl[..., R:R + N], xdbl[..., R + N:]
    if c["mamba_inner_layernorms"]:
        eps = c["rms_norm_eps"]
        dt = rmsnorm(dt, W[pre + "dt_layernorm.weight"], eps)
        Bm = rmsnorm(Bm, W[pre + "B_layernorm.weight"], eps)
        Cm = rmsnorm(Cm, W[pre + "C_layernorm.weight"], eps)
    delta = F.softplus(dt @ W[pre + "dt_proj.0.weight"].T + W[pre + "dt_proj.0.bias"])
    A = -torch.exp(W[pre + "A_log.0"])
    h = torch.zeros(B, di, N)
    ys = []
    for t in range(S):
        dA = torch.exp(delta[:, t, :, None] * A)
        h = dA * h + delta[:, t, :, None] * Bm[:, t, None, :] * u[:, t, :, None]
        ys.append((h * Cm[:, t, None, :]).sum(-1) + W[pre + "D.0"] * u[:, t])
    y = torch.stack(ys, 1)
    return y * F.silu(z)


def model_loss(c, W, ids, targets):
    d, L, M = c["hidden_size"], c["num_hidden_layers"], c["num_memory_tokens"]
    Hq, Hkv, dqk, dv = c["num_attention_heads"], c["num_key_value_heads"], c["qk_head_dim"], c["v_head_dim"]
    eps, di = c["rms_norm_eps"], c["mamba_expand"] * d
    B, T = ids.shape
    x = W["model.embed_tokens.weight"][ids]
    if M > 0:
        x = torch.cat([W["model.memory_tokens"][None].expand(B, -1, -1), x], 1)
    S = x.shape[1]
    producer = list(range(L))
    for g in c["kv_reuse_group"]:
        for l in g[1:]:
            producer[l] = g[0]
    kv = {}
    for l in range(L):
        p = f"model.layers.{l}."
        h = rmsnorm(x, W[p + "input_layernorm.weight"], eps)
        P = h @ W[p + "mamba.in_proj.weight"].T
        col = 0
        q = P[..., col:col + Hq * dqk].reshape(B, S, Hq, dqk)
        col += Hq * dqk
        if producer[l] == l:
            k = P[..., col:col + Hkv * dqk].reshape(B, S, Hkv, dqk)
            col += Hkv * dqk
            v = P[..., col:col + Hkv * dv].reshape(B, S, Hkv, dv)
            col += Hkv * dv
            kv[l] = (rope(k, c["rope_theta"]), v)
        xs, zs = P[..., col:col + di], P[..., col + di:col + 2 * di]
        k, v = kv[producer[l]]
        window = 0 if l in c["global_attn_idx"] else c["sliding_window"]
        a = attention(rope(q, c["rope_theta"]), k, v, window, M)
        m = mamba(c, W, p + "mamba.", xs, zs)
        mix = (rmsnorm(a, W[p + "mamba.pre_avg_layernorm1.weight"], eps)
               + rmsnorm(m, W[p + "mamba.pre_avg_layernorm2.weight"], eps)) / 2
        x = x + mix @ W[p + "mamba.out_proj.weight"].T
        h2 = rmsnorm(x, W[p + "pre_moe_layernorm.weight"], eps)
        e = p + "moe.experts.0."
        x = x + (F.silu(h2 @ W[e + "gate_proj.weight"].T) * (h2 @ W[e + "up_proj.weight"].T)) @ W[e + "down_proj.weight"].T
    hf = rmsnorm(x, W["model.final_layernorm.weight"], eps)[:, M:]
    logits = hf @ W["model.embed_tokens.weight"].T
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)
    return logits, loss


def main(directory):
    with open(f"{directory}/config.json") as f:
        c = json.load(f)
    assert c["proj_style"] == "fused" and c["fusion"] == "norm_mean" and c["tie_word_embeddings"]
    W = {k: v.requires_grad_(True) for k, v in read_safetensors(f"{directory}/model.safetensors").items()}
    gen = torch.Generator().manual_seed(0)
    B, T, V = 2, 9, c["vocab_size"]
    ids = torch.randint(0, V, (B, T), generator=gen)
    targets = torch.randint(0, V, (B, T), generator=gen)
    targets[0, 2] = -100
    logits, loss = model_loss(c, W, ids, targets)
    loss.backward()
    out = {"ids": ids.double(), "targets": targets.double(), "logits": logits, "loss": loss.reshape(1)}
    for name, w in W.items():
        out["grad." + name] = w.grad
    write_safetensors(f"{directory}/expected.safetensors", out)
    print(f"loss {loss.item():.6f}; wrote {directory}/expected.safetensors")


if __name__ == "__main__":
    main(sys.argv[1])
