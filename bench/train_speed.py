#!/usr/bin/python3
"""Training throughput of hymba.cpp against a PyTorch peer, on the CPU.

For each tiny config in bench/configs (transformer, mamba, hybrid) this
trains the same architecture twice on the same number of threads:

  * PyTorch (float32, eager): a model written here to match hymba's layers
    tensor for tensor, AdamW (lr 3e-4, betas 0.9/0.95, wd 0.1 on matrices) +
    cross-entropy + grad clip 1.0 on random token batches; with
    --precision bf16 or both, also the same under
    torch.autocast("cpu", dtype=torch.bfloat16) (the CPU form of the seeds'
    AMP: matrix products in bf16, float32 master weights);
  * hymba: `hymba --threads N train --config ... --json` on a text corpus,
    with --precision bf16 or both also `--precision bf16` (its matrix
    products in bf16 with float32 sums; needs AVX512-BF16).

Both count B*T tokens per optimizer step and exclude warm-up steps: the
PyTorch side times --steps steps after --warmup untimed ones; the hymba side
runs --warmup + --steps steps with --log-interval 1 and sums the per-step
times of the last --steps from metrics.jsonl (the summary's
train_tokens_per_s, which includes the warm-up steps, is kept in --json).

Checks, before timing: the peer's chunked parallel Mamba scan (see
linear_scan / SelectiveScan) against a sequential loop, values and
gradients; and, per config, the peer against hymba itself: hymba's init
weights loaded into the peer (float64) give the same loss, logits and
parameter gradients as `hymba forward --grads` (skip with --no-check).

Both sides run with OMP_WAIT_POLICY=passive unless the environment sets it
(with the default spinning policy a loaded machine slows torch ~15x), and the
peer keeps freed memory in the malloc heap (--default-malloc to not).

Needs Debian's python3-torch (torch 1.13; `scripts/setup.sh --peers` installs it), hence /usr/bin/python3:
  bench/train_speed.py                         # all three configs, 2 threads
  bench/train_speed.py --threads 1 --configs mamba,hybrid --json
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

# Both sides run with the same OpenMP wait policy: passive (hymba's usual
# setting, and far better on a shared machine) unless the environment says
# otherwise. It must be set before torch loads libgomp.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = ("transformer", "mamba", "hybrid")

# ---------------------------------------------------------------------------
# Config: the fields of docs/model-config.md with hymba's defaults.

DEFAULTS = {
    "vocab_size": 256, "hidden_size": 128, "num_hidden_layers": 2, "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True, "dropout": 0.0, "initializer_range": 0.02, "layer_types": "hybrid",
    "num_attention_heads": 4, "num_key_value_heads": 4, "qk_head_dim": None, "v_head_dim": None,
    "rope_theta": 10000.0, "global_attn_idx": [], "sliding_window": 0, "num_memory_tokens": 0,
    "kv_reuse_group": [], "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_dt_rank": "auto",
    "mamba_conv_bias": True, "mamba_inner_layernorms": False, "mamba_dt_min": 0.001, "mamba_dt_max": 0.1,
    "proj_style": "fused", "fusion": "norm_mean", "attn_mamba_ratio": None, "intermediate_size": 0,
}


def load_config(path):
    with open(path) as f:
        raw = json.load(f)
    unknown = set(raw) - set(DEFAULTS) - {"model_type"}
    if unknown:
        sys.exit(f"{path}: fields this peer does not model: {sorted(unknown)}")
    c = dict(DEFAULTS)
    c.update(raw)
    L, d, H = c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"]
    if isinstance(c["layer_types"], str):
        c["layer_types"] = [c["layer_types"]] * L
    kinds = set(c["layer_types"])
    if len(kinds) != 1:
        sys.exit(f"{path}: mixed layer_types are not modelled by this peer")
    c["kind"] = kinds.pop()
    c["d_inner"] = c["mamba_expand"] * d
    if c["mamba_dt_rank"] == "auto":
        c["mamba_dt_rank"] = math.ceil(d / 16)
    if c["qk_head_dim"] is None:
        c["qk_head_dim"] = d // H
    if c["v_head_dim"] is None:
        # fused norm_mean hybrids: v = d_inner / heads (official 64 / 128)
        fused_nm = c["kind"] == "hybrid" and c["proj_style"] == "fused" and c["fusion"] == "norm_mean"
        c["v_head_dim"] = c["d_inner"] // H if fused_nm else d // H
    # What the peer implements; anything else would not be a like-for-like run.
    checks = {
        "tie_word_embeddings": True, "dropout": 0.0, "num_memory_tokens": 0, "sliding_window": 0,
        "kv_reuse_group": [], "mamba_inner_layernorms": False, "attn_mamba_ratio": None,
    }
    for k, v in checks.items():
        if c[k] != v:
            sys.exit(f"{path}: {k}={c[k]!r} is not modelled by this peer (needs {v!r})")
    if c["kind"] == "hybrid" and (c["proj_style"], c["fusion"]) != ("fused", "norm_mean"):
        sys.exit(f"{path}: only the official fused / norm_mean hybrid layer is modelled")
    return c


# ---------------------------------------------------------------------------
# Building blocks.

class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def linear(n_in, n_out, std):
    m = nn.Linear(n_in, n_out, bias=False)
    nn.init.normal_(m.weight, std=std)
    return m


class Rope:
    """Rotate-half RoPE, positions 0..T-1, tables cached per (T, dim)."""

    def __init__(self, theta):
        self.theta, self.cache = theta, {}

    def tables(self, T, D):
        if (T, D) not in self.cache:
            inv = self.theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
            ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
            cos, sin = ang.cos().float(), ang.sin().float()
            self.cache[(T, D)] = (torch.cat([cos, cos], -1), torch.cat([sin, sin], -1))
        return self.cache[(T, D)]

    def __call__(self, x):  # x: [B, H, T, D]
        cos, sin = self.tables(x.shape[-2], x.shape[-1])
        h = x.shape[-1] // 2
        rot = torch.cat([-x[..., h:], x[..., :h]], -1)
        return x * cos + rot * sin


_masks = {}


def causal_attention(q, k, v):
    """q, k: [B, H, T, dqk]; v: [B, H, T, dv]. Masked softmax (torch 1.13 has
    no F.scaled_dot_product_attention)."""
    T = q.shape[-2]
    if T not in _masks:
        _masks[T] = torch.full((T, T), float("-inf")).triu(1)
    scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1])) + _masks[T]
    return torch.matmul(scores.softmax(-1), v)


def split_heads(x, H):  # [B, T, H*D] -> [B, H, T, D]
    B, T, _ = x.shape
    return x.view(B, T, H, -1).transpose(1, 2)


def merge_heads(x):  # [B, H, T, D] -> [B, T, H*D]
    B, H, T, D = x.shape
    return x.transpose(1, 2).reshape(B, T, H * D)


class SwiGLU(nn.Module):
    def __init__(self, d, inter, std, out_std):
        super().__init__()
        self.gate_proj, self.up_proj = linear(d, inter, std), linear(d, inter, std)
        self.down_proj = linear(inter, d, out_std)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


# ---------------------------------------------------------------------------
# Selective scan.

def selective_scan_sequential(u, delta, A, Bm, Cm, D):
    """Reference: h_t = exp(delta_t A) h_{t-1} + delta_t B_t u_t, y_t = C_t h_t + D u_t.
    u, delta: [B, T, di]; A: [di, N]; Bm, Cm: [B, T, N]; D: [di]."""
    Bsz, T, di = u.shape
    h = u.new_zeros(Bsz, di, A.shape[1])
    ys = []
    for t in range(T):
        h = torch.exp(delta[:, t, :, None] * A) * h + (delta[:, t] * u[:, t])[..., None] * Bm[:, t, None, :]
        ys.append((h * Cm[:, t, None, :]).sum(-1))
    return torch.stack(ys, 1) + u * D


# exp(-S) below reaches exp(SCAN_LOG_LIMIT); float32 overflows past ~88.7.
SCAN_LOG_LIMIT = 60.0


def chunk_length(a, chunk):
    """Largest power-of-two fraction of `chunk` for which every chunk's total
    decay |sum a| is <= SCAN_LOG_LIMIT (a <= 0, time on the last axis)."""
    T = a.shape[-1]
    L = max(1, min(chunk, T))
    while L > 1:
        pad = (-T) % L
        ap = F.pad(a, (0, pad)) if pad else a
        if -ap.view(*a.shape[:-1], -1, L).sum(-1).min().item() <= SCAN_LOG_LIMIT:
            break
        L //= 2
    return L


def linear_scan(a, x, chunk):
    """States of h_t = exp(a_t) h_{t-1} + x_t (h_{-1} = 0, a <= 0) for a and x
    of shape [..., T] (time last, so the cumulative sums run over contiguous
    memory), as a chunked parallel scan; x is consumed (reused for the output).
    Inside a chunk with S_t = sum_{s<=t} a_s (log-space cumulative decay):

        h_t = exp(S_t) * (h_start + sum_{s<=t} exp(-S_s) x_s)

    All chunks are solved at once from a zero state (two cumsums over the
    chunk axis), then the T/L chunk-start states are carried by a short loop
    and added back as exp(S_t) h_start. exp(-S_s) grows with the decay
    accumulated inside a chunk, so the chunk length is halved until every
    chunk's total decay is below SCAN_LOG_LIMIT; chunk 1 is the plain
    recurrence, always finite."""
    T = x.shape[-1]
    L = chunk_length(a, chunk)
    pad = (-T) % L
    if pad:  # zero decay and input past the end: the padded steps are inert
        a, x = F.pad(a, (0, pad)), F.pad(x, (0, pad))
    nC = (T + pad) // L
    lead = x.shape[:-1]
    S = a.reshape(*lead, nC, L).cumsum(-1)
    eS = torch.exp(S)
    h = x.view(*lead, nC, L)
    if L > 1:
        h.mul_(S.neg_().exp_())  # exp(-S_s) x_s
        h = torch.cumsum(h, -1).mul_(eS)  # zero-start states
    del S
    for c in range(1, nC):  # h[..., c - 1, -1] is final by now: the state entering chunk c
        h[..., c, :].addcmul_(eS[..., c, :], h[..., c - 1, -1:])
    h = h.view(*lead, nC * L)
    return h[..., :T] if pad else h


class SelectiveScan(torch.autograd.Function):
    """y_t = C_t . h_t with h_t = exp(delta_t A) h_{t-1} + delta_t B_t u_t.

    Internally [B, di, N, T] (time last). Forward: one chunked parallel scan
    (linear_scan). Backward: the adjoint dh_t = C_t g_t + exp(a_{t+1}) dh_{t+1}
    is the same scan run backwards in time; the input gradients then follow
    elementwise from h, h_{t-1} and dh. Only h is kept between the passes."""

    @staticmethod
    def forward(ctx, u, delta, A, Bm, Cm, chunk):
        Bsz, T, di = u.shape
        N = A.shape[1]
        dT = delta.transpose(1, 2)[:, :, None, :]  # [B, di, 1, T]
        a = torch.mul(dT, A[None, :, :, None], out=u.new_empty(Bsz, di, N, T))
        x = torch.mul((delta * u).transpose(1, 2)[:, :, None, :], Bm.transpose(1, 2)[:, None, :, :],
                      out=u.new_empty(Bsz, di, N, T))
        h = linear_scan(a, x, chunk)
        del a
        y = (h * Cm.transpose(1, 2)[:, None, :, :]).sum(2)  # [B, di, T]
        ctx.save_for_backward(u, delta, A, Bm, Cm, h)
        ctx.chunk = chunk
        return y.transpose(1, 2)

    @staticmethod
    def backward(ctx, g):
        u, delta, A, Bm, Cm, h = ctx.saved_tensors
        Bsz, T, di = u.shape
        N = A.shape[1]
        gT = g.transpose(1, 2)[:, :, None, :]  # [B, di, 1, T]
        dT = delta.transpose(1, 2)[:, :, None, :]
        BT, CT = Bm.transpose(1, 2)[:, None], Cm.transpose(1, 2)[:, None]  # [B, 1, N, T]
        # adjoint, backwards in time: step t decays by exp(a_{t+1}), the last step by nothing
        a_rev = u.new_zeros(Bsz, di, N, T)
        torch.mul(dT[..., 1:], A[None, :, :, None], out=a_rev[..., :-1])
        gC = torch.mul(gT, CT, out=u.new_empty(Bsz, di, N, T))
        dh = linear_scan(a_rev.flip(-1), gC.flip(-1), ctx.chunk).flip(-1)
        del a_rev, gC
        dC = (h * gT).sum(1).transpose(1, 2)  # [B, T, N]
        # da_t = dh_t * exp(a_t) * h_{t-1}
        da = torch.mul(dT, A[None, :, :, None], out=u.new_empty(Bsz, di, N, T)).exp_()
        da[..., 0].zero_()
        da[..., 1:].mul_(h[..., :-1])
        da.mul_(dh)
        dA = (da * dT).sum((0, 3))
        ddelta = da.mul_(A[None, :, :, None]).sum(2)  # [B, di, T]
        del da
        dux = (dh * BT).sum(2)  # d(delta*u): [B, di, T]
        dB = (dh * (delta * u).transpose(1, 2)[:, :, None, :]).sum(1).transpose(1, 2)
        uT = u.transpose(1, 2)
        ddelta += dux * uT
        return (dux * dT[:, :, 0]).transpose(1, 2), ddelta.transpose(1, 2), dA, dB, dC, None


def selective_scan_chunked(u, delta, A, Bm, Cm, D, chunk=64):
    """Parallel selective scan (see SelectiveScan, linear_scan) plus the D skip."""
    return SelectiveScan.apply(u, delta, A, Bm, Cm, chunk) + u * D


def check_scan():
    """The chunked scan must match the sequential loop (values and gradients),
    including a ragged last chunk and the chunk-halving path for large decays."""
    gen = torch.Generator().manual_seed(0)

    def case(dtype, B, T, di, N, chunk, dt_scale):
        u = torch.randn(B, T, di, generator=gen, dtype=dtype)
        delta = F.softplus(torch.randn(B, T, di, generator=gen, dtype=dtype)) * dt_scale
        A = -torch.exp(torch.randn(di, N, generator=gen, dtype=dtype))
        Bm = torch.randn(B, T, N, generator=gen, dtype=dtype)
        Cm = torch.randn(B, T, N, generator=gen, dtype=dtype)
        D = torch.randn(di, generator=gen, dtype=dtype)
        outs = []
        for fn in (selective_scan_sequential, lambda *a: selective_scan_chunked(*a, chunk=chunk)):
            ins = [t.clone().requires_grad_(True) for t in (u, delta, A, Bm, Cm, D)]
            y = fn(*ins)
            (y * torch.linspace(-1, 1, y.numel(), dtype=dtype).view_as(y)).sum().backward()
            outs.append([y.detach()] + [t.grad for t in ins])
        tol = dict(rtol=1e-9, atol=1e-9) if dtype == torch.float64 else dict(rtol=1e-3, atol=1e-4)
        names = ("y", "du", "ddelta", "dA", "dB", "dC", "dD")
        for name, ref, got in zip(names, outs[0], outs[1]):
            if not (torch.isfinite(got).all() and torch.allclose(got, ref, **tol)):
                raise AssertionError(
                    f"scan check: {name} differs from the sequential scan by {(got - ref).abs().max().item():.3g} "
                    f"({dtype}, T={T}, chunk={chunk}, dt_scale={dt_scale})")

    case(torch.float64, 2, 37, 6, 4, 8, 1.0)     # ragged: 37 = 4*8 + 5
    case(torch.float64, 2, 64, 5, 3, 64, 1.0)    # one chunk
    case(torch.float64, 2, 50, 4, 3, 16, 30.0)   # large decays: forces chunk halving
    case(torch.float32, 2, 96, 8, 16, 32, 0.3)
    case(torch.float32, 1, 80, 4, 16, 64, 20.0)  # would overflow float32 without halving


# ---------------------------------------------------------------------------
# Layers, named like hymba's checkpoint tensors.

class MambaMixer(nn.Module):
    """HF-Mamba mixer (Mamba layers) or the Mamba branch of a fused hybrid."""

    def __init__(self, c, std, out_std, in_proj_rows):
        super().__init__()
        d, di, N, R, K = c["hidden_size"], c["d_inner"], c["mamba_d_state"], c["mamba_dt_rank"], c["mamba_d_conv"]
        self.di, self.N, self.R, self.K = di, N, R, K
        self.in_proj = linear(d, in_proj_rows, std)
        self.conv1d = nn.Conv1d(di, di, K, groups=di, padding=K - 1, bias=c["mamba_conv_bias"])
        self.x_proj = linear(di, R + 2 * N, std)
        self.dt_proj = nn.Linear(R, di, bias=True)
        nn.init.uniform_(self.dt_proj.weight, -R ** -0.5, R ** -0.5)
        lo, hi = math.log(c["mamba_dt_min"]), math.log(c["mamba_dt_max"])
        dt = torch.exp(torch.rand(di) * (hi - lo) + lo)
        with torch.no_grad():
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus
        self.A_log = nn.Parameter(torch.log(torch.arange(1, N + 1, dtype=torch.float32)).repeat(di, 1))
        self.D = nn.Parameter(torch.ones(di))
        self.out_proj = linear(di, d, out_std)

    def ssm(self, xs, z, chunk):
        T = xs.shape[1]
        u = F.silu(self.conv1d(xs.transpose(1, 2))[..., :T].transpose(1, 2))
        dt, Bm, Cm = self.x_proj(u).split([self.R, self.N, self.N], -1)
        delta = F.softplus(self.dt_proj(dt))
        y = selective_scan_chunked(u, delta, -torch.exp(self.A_log), Bm, Cm, self.D, chunk)
        return y * F.silu(z)

    def forward(self, h, chunk):  # plain Mamba layer
        xs, z = self.in_proj(h).chunk(2, -1)
        return self.out_proj(self.ssm(xs, z, chunk))


class MambaBlock(nn.Module):
    def __init__(self, c, std, out_std):
        super().__init__()
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.mixer = MambaMixer(c, std, out_std, 2 * c["d_inner"])
        self.ffn = None
        if c["intermediate_size"] > 0:
            self.pre_moe_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
            self.ffn = SwiGLU(c["hidden_size"], c["intermediate_size"], std, out_std)

    def forward(self, x, rope, chunk):
        x = x + self.mixer(self.norm(x), chunk)
        if self.ffn is not None:
            x = x + self.ffn(self.pre_moe_layernorm(x))
        return x


class AttentionBlock(nn.Module):
    def __init__(self, c, std, out_std):
        super().__init__()
        d, H, Hkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        dqk, dv = c["qk_head_dim"], c["v_head_dim"]
        self.H, self.Hkv = H, Hkv
        self.input_layernorm = RMSNorm(d, c["rms_norm_eps"])
        self.q_proj, self.k_proj = linear(d, H * dqk, std), linear(d, Hkv * dqk, std)
        self.v_proj, self.o_proj = linear(d, Hkv * dv, std), linear(H * dv, d, out_std)
        self.ffn = None
        if c["intermediate_size"] > 0:
            self.pre_moe_layernorm = RMSNorm(d, c["rms_norm_eps"])
            self.ffn = SwiGLU(d, c["intermediate_size"], std, out_std)

    def forward(self, x, rope, chunk):
        h = self.input_layernorm(x)
        q = rope(split_heads(self.q_proj(h), self.H))
        k = rope(split_heads(self.k_proj(h), self.Hkv))
        v = split_heads(self.v_proj(h), self.Hkv)
        if self.Hkv != self.H:
            k, v = k.repeat_interleave(self.H // self.Hkv, 1), v.repeat_interleave(self.H // self.Hkv, 1)
        x = x + self.o_proj(merge_heads(causal_attention(q, k, v)))
        if self.ffn is not None:
            x = x + self.ffn(self.pre_moe_layernorm(x))
        return x


class HybridBlock(nn.Module):
    """The official fused layer: one in_proj -> Q|K|V|x|z; attention and the
    Mamba branch in parallel; out_proj((norm_a(attn) + norm_m(mamba)) / 2)."""

    def __init__(self, c, std, out_std):
        super().__init__()
        d, H, Hkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        dqk, dv, di, eps = c["qk_head_dim"], c["v_head_dim"], c["d_inner"], c["rms_norm_eps"]
        self.H, self.Hkv = H, Hkv
        self.split = [H * dqk, Hkv * dqk, Hkv * dv, di, di]
        self.input_layernorm = RMSNorm(d, eps)
        self.mamba = MambaMixer(c, std, out_std, sum(self.split))
        self.mamba.pre_avg_layernorm1 = RMSNorm(H * dv, eps)
        self.mamba.pre_avg_layernorm2 = RMSNorm(di, eps)
        self.ffn = None
        if c["intermediate_size"] > 0:
            self.pre_moe_layernorm = RMSNorm(d, eps)
            self.ffn = SwiGLU(d, c["intermediate_size"], std, out_std)

    def forward(self, x, rope, chunk):
        m = self.mamba
        q, k, v, xs, z = m.in_proj(self.input_layernorm(x)).split(self.split, -1)
        q, k, v = rope(split_heads(q, self.H)), rope(split_heads(k, self.Hkv)), split_heads(v, self.Hkv)
        if self.Hkv != self.H:
            k, v = k.repeat_interleave(self.H // self.Hkv, 1), v.repeat_interleave(self.H // self.Hkv, 1)
        attn = merge_heads(causal_attention(q, k, v))
        y = m.ssm(xs, z, chunk)
        x = x + m.out_proj((m.pre_avg_layernorm1(attn) + m.pre_avg_layernorm2(y)) * 0.5)
        if self.ffn is not None:
            x = x + self.ffn(self.pre_moe_layernorm(x))
        return x


BLOCKS = {"attention": AttentionBlock, "mamba": MambaBlock, "hybrid": HybridBlock}


class LM(nn.Module):
    def __init__(self, c, chunk):
        super().__init__()
        std = c["initializer_range"]
        out_std = std / math.sqrt(2 * c["num_hidden_layers"])
        self.chunk = chunk
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        nn.init.normal_(self.embed_tokens.weight, std=std)
        self.layers = nn.ModuleList(BLOCKS[c["kind"]](c, std, out_std) for _ in range(c["num_hidden_layers"]))
        self.final_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.rope = Rope(c["rope_theta"])

    def forward(self, ids, targets, return_logits=False):
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x, self.rope, self.chunk)
        logits = F.linear(self.final_layernorm(x), self.embed_tokens.weight)  # tied LM head
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
        return (loss, logits) if return_logits else loss


# ---------------------------------------------------------------------------
# Equivalence with hymba: same weights, same tokens -> same loss, logits, grads.

def hymba_tensor_name(name, c):
    """The hymba checkpoint name (docs/checkpoint-format.md) of a peer parameter."""
    hf_mamba = c["kind"] == "mamba" and c["intermediate_size"] == 0
    if hf_mamba:
        return {"embed_tokens.weight": "backbone.embeddings.weight",
                "final_layernorm.weight": "backbone.norm_f.weight"}.get(name, "backbone." + name)
    n = "model." + name
    n = n.replace(".ffn.", ".moe.experts.0.")
    if c["kind"] == "attention":
        for p in ("q_proj", "k_proj", "v_proj", "o_proj"):
            n = n.replace(f".{p}.", f".self_attn.{p}.")
    if c["kind"] == "mamba":
        n = n.replace(".norm.", ".input_layernorm.").replace(".mixer.", ".mamba.")
    n = n.replace(".mamba.x_proj.", ".mamba.x_proj.0.").replace(".mamba.dt_proj.", ".mamba.dt_proj.0.")
    for p in ("A_log", "D"):
        if n.endswith(f".mamba.{p}"):
            n += ".0"
    return n


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", (path, name, e["dtype"])
        b, end = e["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[8 + n + b:8 + n + end]), dtype=torch.float32).reshape(e["shape"])
    return out


def check_equivalence(name, c, args):
    """Loads a `hymba init` checkpoint into the peer (float64) and compares
    loss, logits and every gradient with `hymba forward --grads` on the same
    tokens (T chosen so the scan has several chunks and a ragged end)."""
    cfg = os.path.join(REPO, "bench", "configs", name + ".json")
    B, T, chunk = 2, 37, 8
    gen = torch.Generator().manual_seed(3)
    ids = torch.randint(0, c["vocab_size"], (B, T), generator=gen)
    tgt = torch.randint(0, c["vocab_size"], (B, T), generator=gen)
    fmt = lambda t: ";".join(",".join(str(v) for v in row) for row in t.tolist())
    with tempfile.TemporaryDirectory(prefix="hymba-train-speed-eq-") as tmp:
        ckpt, out = os.path.join(tmp, "ckpt"), os.path.join(tmp, "out.safetensors")
        for cmd in ([args.hymba, "init", "--config", cfg, "--out", ckpt, "--seed", "7"],
                    [args.hymba, "--threads", str(args.threads), "forward", "--ckpt", ckpt, "--ids", fmt(ids),
                     "--targets", fmt(tgt), "--grads", "--out", out]):
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                sys.exit(f"equivalence check: hymba failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
        W = read_safetensors(os.path.join(ckpt, "model.safetensors"))
        ref = read_safetensors(out)
    model = LM(c, chunk).double()
    names = {hymba_tensor_name(n, c): n for n, _ in model.named_parameters()}
    if set(names) != set(W):
        sys.exit(f"equivalence check ({name}): tensor names differ: only in the peer "
                 f"{sorted(set(names) - set(W))}, only in hymba {sorted(set(W) - set(names))}")
    params = dict(model.named_parameters())
    with torch.no_grad():
        for hn, pn in names.items():
            params[pn].copy_(W[hn])
    loss, logits = model(ids, tgt, return_logits=True)
    loss.backward()
    worst = {"loss": abs(loss.item() - ref["loss"].item()),
             "logits": (logits.detach() - ref["logits"].double()).abs().max().item()}
    for hn, pn in names.items():
        g, rg = params[pn].grad, ref["grad." + hn].double()
        worst["grad." + hn] = ((g - rg).abs().max() / rg.abs().max().clamp_min(1e-12)).item()
    bad = {k: v for k, v in worst.items() if v > (2e-3 if k.startswith("grad.") else 1e-4)}
    if bad:
        sys.exit(f"equivalence check ({name}): the peer differs from hymba: {bad}")
    return {"loss_abs": worst["loss"], "logits_abs": worst["logits"],
            "grad_rel_max": max(v for k, v in worst.items() if k.startswith("grad."))}


# ---------------------------------------------------------------------------
# Measurements.

def tune_malloc():
    """glibc serves blocks over the mmap threshold (at most 32 MiB) with fresh
    mmaps, so every large activation of the peer page-faults anew (4-5x slower
    elementwise ops here). Keeping freed memory in the heap is the usual CPU
    PyTorch tuning (jemalloc/tcmalloc do the same); hymba is not affected (it
    runs in its own process)."""
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
        libc.mallopt(M_MMAP_MAX, 0)
        libc.mallopt(M_TRIM_THRESHOLD, 1 << 30)
    except OSError:
        pass


def torch_train(c, args, bf16=False):
    """bf16: the forward pass under CPU autocast (matrix products in bf16)."""
    torch.manual_seed(1234)
    model = LM(c, args.chunk)
    params = sum(p.numel() for p in model.parameters())
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.dim() >= 2 and "A_log" not in name else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8, foreach=True)
    V, B, T = c["vocab_size"], args.batch, args.seq_len
    gen = torch.Generator().manual_seed(0)
    batches = [(torch.randint(0, V, (B, T), generator=gen), torch.randint(0, V, (B, T), generator=gen))
               for _ in range(min(8, args.warmup + args.steps))]

    def step(i):
        ids, tgt = batches[i % len(batches)]
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(ids, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    for i in range(args.warmup):
        step(i)
    times, losses = [], []
    for i in range(args.warmup, args.warmup + args.steps):
        t0 = time.perf_counter()
        losses.append(step(i))
        times.append(time.perf_counter() - t0)
    if not all(math.isfinite(l) for l in losses):
        sys.exit(f"PyTorch peer: loss not finite: {losses}")
    return {"params": params, "tokens_per_s": args.steps * B * T / sum(times),
            "step_ms_median": 1e3 * statistics.median(times), "final_loss": losses[-1]}


def hymba_train(name, args, precision="f32"):
    cfg = os.path.join(REPO, "bench", "configs", name + ".json")
    total = args.warmup + args.steps
    with tempfile.TemporaryDirectory(prefix="hymba-train-speed-") as tmp:
        out = os.path.join(tmp, "run")
        cmd = [args.hymba, "--threads", str(args.threads), "train", "--config", cfg, "--data", args.data,
               "--out", out, "--steps", str(total), "--batch", str(args.batch), "--seq-len", str(args.seq_len),
               "--log-interval", "1", "--eval-interval", "100000", "--save-interval", "100000",
               "--eval-windows", "1", "--precision", precision, "--quiet", "--json"]
        env = dict(os.environ)  # OMP_WAIT_POLICY as for the PyTorch side
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.exit(f"hymba failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
        summary = json.loads(r.stdout)
        with open(os.path.join(out, "metrics.jsonl")) as f:
            recs = [json.loads(l) for l in f if l.strip()]
    step_tokens = args.batch * args.seq_len
    times = [step_tokens / m["tokens_per_s"] for m in recs
             if "tokens_per_s" in m and m["step"] > args.warmup and m["tokens_per_s"] > 0]
    if len(times) != args.steps:
        sys.exit(f"hymba: expected {args.steps} timed steps in metrics.jsonl, found {len(times)}")
    return {"params": summary["params"], "tokens_per_s": args.steps * step_tokens / sum(times),
            "step_ms_median": 1e3 * statistics.median(times),
            "summary_train_tokens_per_s": summary["train_tokens_per_s"],
            "final_loss": summary["final_train_loss"]}


def best(runs):
    """The fastest repeat (the machine may be shared), with every repeat kept."""
    b = dict(max(runs, key=lambda r: r["tokens_per_s"]))
    b["all_tokens_per_s"] = [round(r["tokens_per_s"], 1) for r in runs]
    return b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2, help="threads on both sides (default 2)")
    ap.add_argument("--seq-len", type=int, default=256, help="T (default 256)")
    ap.add_argument("--batch", type=int, default=8, help="B (default 8)")
    ap.add_argument("--steps", type=int, default=10, help="timed steps (default 10)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    ap.add_argument("--repeats", type=int, default=1, help="runs per side, interleaved; the fastest is reported")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated subset of " + ",".join(CONFIGS))
    ap.add_argument("--precision", choices=("f32", "bf16", "both"), default="f32",
                    help="float32, bf16 (PyTorch's autocast, hymba's --precision bf16), or both timed in turn "
                         "(default f32)")
    ap.add_argument("--hymba", default=os.path.join(REPO, "build", "release", "hymba"), help="hymba binary")
    shakespeare = os.path.normpath(os.path.join(REPO, "..", "shared", "data", "tinyshakespeare.txt"))
    ap.add_argument("--data", default=shakespeare if os.path.exists(shakespeare) else "default",
                    help="hymba's training corpus (default: ../shared/data/tinyshakespeare.txt if present, "
                         "else hymba's built-in 'default')")
    ap.add_argument("--chunk", type=int, default=64, help="chunk length of the PyTorch parallel scan (default 64)")
    ap.add_argument("--default-malloc", action="store_true",
                    help="leave glibc malloc as it is (by default the PyTorch side keeps freed memory instead of "
                         "returning it to the OS, like jemalloc/tcmalloc setups do)")
    ap.add_argument("--skip-hymba", action="store_true", help="measure the PyTorch peer only")
    ap.add_argument("--no-check", action="store_true",
                    help="skip the check that the peer matches hymba (loss, logits, gradients on hymba's weights)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    args = ap.parse_args()
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    for n in names:
        if n not in CONFIGS:
            ap.error(f"--configs: unknown config '{n}' (have {', '.join(CONFIGS)})")
    if min(args.threads, args.seq_len, args.batch, args.steps, args.repeats, args.chunk) < 1 or args.warmup < 0:
        ap.error("--threads, --seq-len, --batch, --steps, --repeats and --chunk must be >= 1, --warmup >= 0")
    if not args.skip_hymba and not os.access(args.hymba, os.X_OK):
        ap.error(f"--hymba: {args.hymba} is not an executable (build it: cmake --build build/release --target hymba)")

    if not args.default_malloc:
        tune_malloc()
    torch.set_num_threads(args.threads)
    check_scan()

    load_start = os.getloadavg() if hasattr(os, "getloadavg") else None
    results = []
    for name in names:
        c = load_config(os.path.join(REPO, "bench", "configs", name + ".json"))
        eq = None if args.skip_hymba or args.no_check else check_equivalence(name, c, args)
        pt_runs, pt_bf16_runs, hy_runs, hy_bf16_runs = [], [], [], []
        for _ in range(args.repeats):
            if args.precision != "bf16":
                pt_runs.append(torch_train(c, args))
                if not args.skip_hymba:
                    hy_runs.append(hymba_train(name, args))
            if args.precision != "f32":
                pt_bf16_runs.append(torch_train(c, args, bf16=True))
                if not args.skip_hymba:
                    hy_bf16_runs.append(hymba_train(name, args, "bf16"))
        row = {"config": name}
        if pt_runs:
            row["torch"] = best(pt_runs)
        if pt_bf16_runs:
            row["torch_bf16"] = best(pt_bf16_runs)
        if eq:
            row["equivalence"] = eq
        if hy_runs:
            row["hymba"] = best(hy_runs)
        if hy_bf16_runs:
            row["hymba_bf16"] = best(hy_bf16_runs)
        for ours, theirs, key in (("hymba", "torch", "ratio"), ("hymba_bf16", "torch_bf16", "ratio_bf16")):
            if ours in row and theirs in row:
                row[key] = row[ours]["tokens_per_s"] / row[theirs]["tokens_per_s"]
        results.append(row)
        if not args.json:
            print(f"  {name}: done", file=sys.stderr)

    try:
        load = os.getloadavg()
    except OSError:
        load = None
    meta = {"threads": args.threads, "omp_wait_policy": os.environ["OMP_WAIT_POLICY"], "seq_len": args.seq_len,
            "batch": args.batch, "steps": args.steps, "precision": args.precision,
            "warmup": args.warmup, "repeats": args.repeats, "scan_chunk": args.chunk, "torch": torch.__version__,
            "hymba": None if args.skip_hymba else args.hymba, "data": args.data,
            "loadavg_start": list(load_start) if load_start else None, "loadavg_end": list(load) if load else None}
    if args.json:
        print(json.dumps({"meta": meta, "results": results}, indent=2))
        return
    print(f"training throughput, {args.threads} threads, T={args.seq_len}, batch {args.batch}, "
          f"{args.steps} timed steps after {args.warmup} warm-up (best of {args.repeats}), CPU, "
          f"precision {args.precision}; torch {torch.__version__}; OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}")
    hdr = (f"{'config':<12} {'params torch':>12} {'params hymba':>12} {'torch tok/s':>12} {'torch bf16':>11} "
           f"{'hymba tok/s':>12} {'hymba bf16':>11} {'f32 ratio':>10} {'bf16 ratio':>10}")
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        h = r.get("hymba") or r.get("hymba_bf16")
        pt = r.get("torch") or r["torch_bf16"]
        f32 = f"{r['torch']['tokens_per_s']:,.0f}" if "torch" in r else "-"
        b16 = f"{r['torch_bf16']['tokens_per_s']:,.0f}" if "torch_bf16" in r else "-"
        hp = f"{h['params']:,}" if h else "-"
        ht = f"{r['hymba']['tokens_per_s']:,.0f}" if "hymba" in r else "-"
        hb = f"{r['hymba_bf16']['tokens_per_s']:,.0f}" if "hymba_bf16" in r else "-"
        ratio = f"{r['ratio']:.2f}x" if "ratio" in r else "-"
        ratio_bf16 = f"{r['ratio_bf16']:.2f}x" if "ratio_bf16" in r else "-"
        print(f"{r['config']:<12} {pt['params']:>12,} {hp:>12} {f32:>12} {b16:>11} {ht:>12} {hb:>11} {ratio:>10} "
              f"{ratio_bf16:>10}")
    eqs = [f"{r['config']} |dloss| {r['equivalence']['loss_abs']:.1e}, max grad rel diff "
           f"{r['equivalence']['grad_rel_max']:.1e}" for r in results if "equivalence" in r]
    if eqs:
        print("peer vs hymba on hymba's init weights (B=2, T=37, `hymba forward --grads`): " + "; ".join(eqs))
    if load_start and load:
        print(f"load average (1/5/15 min) at the start {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}, "
              f"at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
