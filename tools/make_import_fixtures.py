#!/usr/bin/python3
"""Writes the import fixtures of tests/test_import.cpp: tiny random checkpoints
in each published layout, and the logits of an independent float64 reference.

Each directory under tests/fixtures/import/ holds what a user downloads from
the Hub, at toy size:

  hf_hymba/            nvidia/Hymba-1.5B-Base style: HymbaForCausalLM config
                       (every key of the released config), BF16 model.safetensors
                       without lm_head (tied), NTK RoPE, meta tokens, KV sharing
  hf_mamba/            state-spaces/mamba-*-hf style: MambaForCausalLM config,
                       F16 weights sharded in two files with
                       model.safetensors.index.json, untied lm_head, and a
                       byte-level BPE tokenizer.json
  state_spaces_mamba/  state-spaces/mamba-* original style: d_model/n_layer/
                       ssm_cfg config, padded vocabulary, backbone.embedding
                       names, F32 weights with the tied lm_head stored too
  state_spaces_mamba_bin/  the same as published: pytorch_model.bin only
                       (torch.save zip), lm_head sharing the embedding's storage
  hf_gpt_neo/          EleutherAI/gpt-neo-125M style: GPTNeoForCausalLM config
                       (every key of the published config), F32 model.safetensors
                       without lm_head (tied), global/local layers in turn with a
                       window shorter than the sequence, a GPT-2 tokenizer.json
  hf_gpt_neo_bin/      the same weights as pytorch_model.bin as transformers 4.9
                       saved it: lm_head stored too, and each layer's causal-mask
                       buffers (attn.attention.bias uint8, masked_bias)
  hf_qwen2/            Qwen/Qwen2.5-0.5B style: Qwen2ForCausalLM config (every
                       key of the released config), BF16 model.safetensors
                       without lm_head (tied), GQA 4/2, q/k/v biases, RoPE base
                       1e6, a GPT-2 tokenizer.json

and expected.safetensors: "ids" [B, T] and "logits" [B, T, V] (float64
reference rounded to F32). The reference follows the released code's
semantics (read from modeling_hymba.py and mamba_ssm / transformers): it does
not share code with the engine.

Needs Debian's python3-torch; only used to (re)generate the committed fixtures:
  tools/make_import_fixtures.py tests/fixtures/import            (all of them)
  tools/make_import_fixtures.py tests/fixtures/import hf_gpt_neo (one family; also hf_qwen2)
"""
import collections
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

from make_model_fixture import DTYPES, write_safetensors

torch.set_default_dtype(torch.float64)

def rounded(tensors, dtype):
    """The values as the file stores them, back in float64 for the reference."""
    return {k: v.to(DTYPES[dtype]).to(torch.float64) for k, v in tensors.items()}


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


# ---------------------------------------------------------------- Mamba mixer


def selective_ssm(u, delta, A, Bm, Cm, Dskip):
    """h_t = exp(delta_t A) h_{t-1} + delta_t B_t u_t ; y_t = C_t h_t + D u_t."""
    Bsz, S, di = u.shape
    h = torch.zeros(Bsz, di, A.shape[1])
    ys = []
    for t in range(S):
        h = torch.exp(delta[:, t, :, None] * A) * h + delta[:, t, :, None] * Bm[:, t, None, :] * u[:, t, :, None]
        ys.append((h * Cm[:, t, None, :]).sum(-1) + Dskip * u[:, t])
    return torch.stack(ys, 1)


def mamba_mixer(xs, zs, conv_w, conv_b, x_proj, dt_w, dt_b, A_log, Dskip, rank, d_state, inner_norms=None):
    S = xs.shape[1]
    K = conv_w.shape[-1]
    conv = F.conv1d(xs.transpose(1, 2), conv_w, conv_b, padding=K - 1, groups=xs.shape[-1])[..., :S]
    u = F.silu(conv.transpose(1, 2))
    dbc = u @ x_proj.T
    dt, Bm, Cm = dbc[..., :rank], dbc[..., rank:rank + d_state], dbc[..., rank + d_state:]
    if inner_norms is not None:
        (wdt, wb, wc), eps = inner_norms
        dt, Bm, Cm = rms(dt, wdt, eps), rms(Bm, wb, eps), rms(Cm, wc, eps)
    delta = F.softplus(dt @ dt_w.T + dt_b)
    return selective_ssm(u, delta, -torch.exp(A_log), Bm, Cm, Dskip) * F.silu(zs)


# ---------------------------------------------------------------- Hymba


def ntk_inv_freq(c, dim):
    base = c["rope_theta"]
    if c["rope_type"] == "ntk":
        factor = 2  # modeling_hymba.py hard-codes it
        base = base * (factor * c["max_position_embeddings"] / c["orig_max_position_embeddings"]
                       - (factor - 1)) ** (dim / (dim - 2))
    return 1.0 / base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)


def rotate(x, inv_freq):
    # x [B, S, H, D]; positions 0..S-1 (meta tokens first); rotate-half
    ang = torch.arange(x.shape[1], dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1)[None, :, None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1)[None, :, None, :]
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rot * sin


def hymba_logits(c, W, ids):
    d, L, M = c["hidden_size"], c["num_hidden_layers"], c["num_memory_tokens"]
    Hq, Hkv = c["num_attention_heads"], c["num_key_value_heads"]
    dqk = c["kq_head_dim"] if c["kq_head_dim"] > 0 else d // Hq
    dv = c["v_head_dim"]
    di, N, R = c["mamba_expand"] * d, c["mamba_d_state"], c["mamba_dt_rank"]
    eps, window = c["rms_norm_eps"], c["sliding_window"]
    inv_freq = ntk_inv_freq(c, dqk)
    Bsz, T = ids.shape
    x = torch.cat([W["model.memory_tokens"][None].expand(Bsz, -1, -1), W["model.embed_tokens.weight"][ids]], 1)
    S = x.shape[1]
    producer = list(range(L))
    for g in c["kv_reuse_group"]:
        for l in g[1:]:
            producer[l] = g[0]
    q_i = torch.arange(S)[:, None]
    k_i = torch.arange(S)[None, :]
    causal = k_i <= q_i
    # Released forward (flex attention): a local query sees keys with q - k <= W, and every meta token.
    local = causal & ((q_i - k_i <= window) | (k_i < M))
    kv = {}
    for l in range(L):
        p = f"model.layers.{l}."
        m = p + "mamba."
        h = rms(x, W[p + "input_layernorm.weight"], eps)
        P = h @ W[m + "in_proj.weight"].T
        q, rest = P[..., :Hq * dqk], P[..., Hq * dqk:]
        if producer[l] == l:
            k, v, rest = rest[..., :Hkv * dqk], rest[..., Hkv * dqk:Hkv * (dqk + dv)], rest[..., Hkv * (dqk + dv):]
            kv[l] = (rotate(k.reshape(Bsz, S, Hkv, dqk), inv_freq), v.reshape(Bsz, S, Hkv, dv))
        xs, zs = rest[..., :di], rest[..., di:]
        k, v = kv[producer[l]]
        q = rotate(q.reshape(Bsz, S, Hq, dqk), inv_freq)
        k, v = k.repeat_interleave(Hq // Hkv, 2), v.repeat_interleave(Hq // Hkv, 2)
        scores = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(dqk)
        mask = causal if l in c["global_attn_idx"] else local
        attn = torch.einsum("bhij,bjhd->bihd", scores.masked_fill(~mask, float("-inf")).softmax(-1), v)
        attn = attn.reshape(Bsz, S, Hq * dv)
        ssm = mamba_mixer(xs, zs, W[m + "conv1d.weight"], W[m + "conv1d.bias"], W[m + "x_proj.0.weight"],
                          W[m + "dt_proj.0.weight"], W[m + "dt_proj.0.bias"], W[m + "A_log.0"], W[m + "D.0"], R, N,
                          ((W[m + "dt_layernorm.weight"], W[m + "B_layernorm.weight"],
                            W[m + "C_layernorm.weight"]), eps))
        mix = (rms(attn, W[m + "pre_avg_layernorm1.weight"], eps) + rms(ssm, W[m + "pre_avg_layernorm2.weight"], eps)) / 2
        x = x + mix @ W[m + "out_proj.weight"].T
        h2 = rms(x, W[p + "pre_moe_layernorm.weight"], eps)
        e = p + "moe.experts.0."
        x = x + (F.silu(h2 @ W[e + "gate_proj.weight"].T) * (h2 @ W[e + "up_proj.weight"].T)) @ W[e + "down_proj.weight"].T
    hf = rms(x, W["model.final_layernorm.weight"], eps)[:, M:]
    return hf @ W["model.embed_tokens.weight"].T


def make_hf_hymba(out, gen):
    L, d, Hq, Hkv, dv, I, V, M = 4, 8, 2, 1, 8, 16, 320, 2
    di, N, R, K = 2 * d, 4, 2, 4
    dqk = d // Hq
    # The released config's keys, at toy size (values that matter differ from 1.5B).
    c = {
        "_name_or_path": "toy/Hymba-Base", "architectures": ["HymbaForCausalLM"],
        "attention_dropout": 0.0, "attn_hidden_size": -1, "attn_implementation": "flex",
        "attn_implementation_new": "flex",
        "auto_map": {"AutoConfig": "configuration_hymba.HymbaConfig",
                     "AutoModelForCausalLM": "modeling_hymba.HymbaForCausalLM"},
        "bos_token_id": 1, "calc_logits_for_entire_prompt": False,
        "conv_dim": {str(i): di for i in range(L)}, "eos_token_id": 2, "global_attn_idx": [0, 3],
        "hidden_act": "silu", "hidden_size": d, "initializer_range": 0.02, "intermediate_size": I,
        "kq_head_dim": -1, "kq_norm": "none", "kv_reuse_every_i_layer": -1, "kv_reuse_group": [[1, 2]],
        "kv_weight_reuse": False, "layer_type": ["h"] * L, "mamba_conv_bias": True, "mamba_d_conv": K,
        "mamba_d_state": N, "mamba_dt_rank": R, "mamba_expand": 2, "mamba_inner_layernorms": True,
        "mamba_proj_bias": False, "max_position_embeddings": 64, "memory_tokens_interspersed_every": 0,
        "mlp_hidden_act": "silu", "model_type": "hymba", "num_attention_heads": Hq, "num_experts": 1,
        "num_experts_per_tok": 1, "num_hidden_layers": L, "num_key_value_heads": Hkv, "num_mamba": 1,
        "num_memory_tokens": M, "orig_max_position_embeddings": 16, "output_router_logits": False,
        "pad_token_id": 0, "rms_norm_eps": None, "rope": True, "rope_theta": 10000.0, "rope_type": "ntk",
        "router_aux_loss_coef": 0.001, "seq_length": 64, "sliding_window": 3, "tie_word_embeddings": True,
        "torch_dtype": "bfloat16", "transformers_version": "4.44.0", "use_cache": False,
        "use_mamba_kernels": True, "v_head_dim": dv, "vocab_size": V,
    }
    rnd = lambda *s: torch.randn(*s, generator=gen) * 0.5
    W = {"model.embed_tokens.weight": rnd(V, d), "model.memory_tokens": rnd(M, d)}
    for l in range(L):
        p, m = f"model.layers.{l}.", f"model.layers.{l}.mamba."
        producer = l not in (2,)
        rows = Hq * dqk + (Hkv * (dqk + dv) if producer else 0) + 2 * di
        W[p + "input_layernorm.weight"] = 1 + rnd(d) * 0.2
        W[m + "in_proj.weight"] = rnd(rows, d)
        W[m + "conv1d.weight"] = rnd(di, 1, K)
        W[m + "conv1d.bias"] = rnd(di)
        W[m + "x_proj.0.weight"] = rnd(R + 2 * N, di)
        W[m + "dt_proj.0.weight"] = rnd(di, R)
        W[m + "dt_proj.0.bias"] = rnd(di) - 2
        W[m + "A_log.0"] = torch.log(torch.arange(1, N + 1, dtype=torch.float64)).repeat(di, 1) + rnd(di, N) * 0.1
        W[m + "D.0"] = 1 + rnd(di) * 0.2
        for n in ("dt_layernorm", "B_layernorm", "C_layernorm", "pre_avg_layernorm1", "pre_avg_layernorm2"):
            width = {"dt_layernorm": R, "B_layernorm": N, "C_layernorm": N}.get(n, di)
            W[m + n + ".weight"] = 1 + rnd(width) * 0.2
        W[m + "out_proj.weight"] = rnd(d, di)
        W[p + "pre_moe_layernorm.weight"] = 1 + rnd(d) * 0.2
        e = p + "moe.experts.0."
        W[e + "gate_proj.weight"], W[e + "up_proj.weight"], W[e + "down_proj.weight"] = rnd(I, d), rnd(I, d), rnd(d, I)
    W["model.final_layernorm.weight"] = 1 + rnd(d) * 0.2
    write_safetensors(f"{out}/model.safetensors", W, "BF16", {"format": "pt"})
    write_json(f"{out}/config.json", c)
    write_json(f"{out}/tokenizer_config.json", {"add_bos_token": True, "add_eos_token": False,
                                                "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                                                "tokenizer_class": "LlamaTokenizer"})
    cfg = dict(c, rms_norm_eps=1e-6)  # null means the default
    ids = torch.randint(0, V, (2, 7), generator=gen)
    return ids, hymba_logits(cfg, rounded(W, "BF16"), ids)


# ---------------------------------------------------------------- Mamba


def mamba_logits(W, ids, L, rank, d_state, eps, embed, lm_head):
    x = W[embed][ids]
    for l in range(L):
        p = f"backbone.layers.{l}."
        m = p + "mixer."
        h = rms(x, W[p + "norm.weight"], eps)
        P = h @ W[m + "in_proj.weight"].T
        di = P.shape[-1] // 2
        y = mamba_mixer(P[..., :di], P[..., di:], W[m + "conv1d.weight"], W.get(m + "conv1d.bias"),
                        W[m + "x_proj.weight"], W[m + "dt_proj.weight"], W[m + "dt_proj.bias"], W[m + "A_log"],
                        W[m + "D"], rank, d_state)
        x = x + y @ W[m + "out_proj.weight"].T
    return rms(x, W["backbone.norm_f.weight"], eps) @ W[lm_head].T


def mamba_weights(gen, L, d, V, N, R, K, embed):
    di = 2 * d
    rnd = lambda *s: torch.randn(*s, generator=gen) * 0.5
    W = {embed: rnd(V, d)}
    for l in range(L):
        p, m = f"backbone.layers.{l}.", f"backbone.layers.{l}.mixer."
        W[m + "A_log"] = torch.log(torch.arange(1, N + 1, dtype=torch.float64)).repeat(di, 1) + rnd(di, N) * 0.1
        W[m + "D"] = 1 + rnd(di) * 0.2
        W[m + "conv1d.weight"] = rnd(di, 1, K)
        W[m + "conv1d.bias"] = rnd(di)
        W[m + "in_proj.weight"] = rnd(2 * di, d)
        W[m + "x_proj.weight"] = rnd(R + 2 * N, di)
        W[m + "dt_proj.weight"] = rnd(di, R)
        W[m + "dt_proj.bias"] = rnd(di) - 2
        W[m + "out_proj.weight"] = rnd(d, di)
        W[p + "norm.weight"] = 1 + rnd(d) * 0.2
    W["backbone.norm_f.weight"] = 1 + rnd(d) * 0.2
    return W


def make_hf_mamba(out, gen, vocab):
    L, d, N, K = 2, 8, 4, 4
    R = math.ceil(d / 16)
    V = vocab
    # transformers' MambaConfig keys as the converted state-spaces/mamba-*-hf repos ship them.
    c = {
        "architectures": ["MambaForCausalLM"], "bos_token_id": 0, "conv_kernel": K, "d_inner": 2 * d,
        "d_model": d, "eos_token_id": 0, "expand": 2, "fused_add_norm": True, "hidden_act": "silu",
        "hidden_size": d, "initializer_range": 0.1, "intermediate_size": 2 * d, "layer_norm_epsilon": 1e-5,
        "model_type": "mamba", "n_layer": L, "num_hidden_layers": L, "pad_token_id": 0,
        "pad_vocab_size_multiple": 8, "rescale_prenorm_residual": False, "residual_in_fp32": True,
        "rms_norm": True, "ssm_cfg": {}, "state_size": N, "tie_word_embeddings": False,
        "time_step_floor": 0.0001, "time_step_init_scheme": "random", "time_step_max": 0.1,
        "time_step_min": 0.001, "time_step_rank": "auto", "time_step_scale": 1.0, "torch_dtype": "float16",
        "transformers_version": "4.39.0.dev0", "use_bias": False, "use_cache": True, "use_conv_bias": True,
        "vocab_size": V,
    }
    W = mamba_weights(gen, L, d, V, N, R, K, "backbone.embeddings.weight")
    W["lm_head.weight"] = torch.randn(V, d, generator=gen) * 0.5
    names = list(W)
    shards = [names[:len(names) // 2], names[len(names) // 2:]]
    weight_map = {}
    total = 0
    for i, part in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        write_safetensors(f"{out}/{fname}", {n: W[n] for n in part}, "F16", {"format": "pt"})
        for n in part:
            weight_map[n] = fname
            total += W[n].numel() * 2
    write_json(f"{out}/model.safetensors.index.json", {"metadata": {"total_size": total}, "weight_map": weight_map})
    write_json(f"{out}/config.json", c)
    ids = torch.randint(0, V, (2, 7), generator=gen)
    return ids, mamba_logits(rounded(W, "F16"), ids, L, R, N, 1e-5, "backbone.embeddings.weight", "lm_head.weight")


def make_state_spaces(out, gen):
    L, d, N, K, R = 2, 8, 4, 4, 3
    V, multiple = 45, 8
    Vp = (V + multiple - 1) // multiple * multiple
    # mamba_ssm's MambaConfig keys (config.json of state-spaces/mamba-130m etc.).
    c = {"d_model": d, "d_intermediate": 0, "n_layer": L, "vocab_size": V,
         "ssm_cfg": {"layer": "Mamba1", "d_state": N, "d_conv": K, "expand": 2, "dt_rank": R,
                     "conv_bias": True, "bias": False},
         "attn_layer_idx": [], "attn_cfg": {}, "rms_norm": True, "residual_in_fp32": True,
         "fused_add_norm": True, "pad_vocab_size_multiple": multiple, "tie_embeddings": True}
    W = mamba_weights(gen, L, d, Vp, N, R, K, "backbone.embedding.weight")
    W["lm_head.weight"] = W["backbone.embedding.weight"]  # tied, but torch.save keeps both names
    write_safetensors(f"{out}/model.safetensors", W, "F32")
    write_json(f"{out}/config.json", c)
    ids = torch.randint(0, V, (2, 7), generator=gen)
    return ids, mamba_logits(rounded(W, "F32"), ids, L, R, N, 1e-5, "backbone.embedding.weight", "lm_head.weight")


def make_state_spaces_bin(out, gen):
    """As published: only pytorch_model.bin (torch.save of the state_dict, F32),
    the tied lm_head stored under its own name on the embedding's storage."""
    L, d, N, K, R = 2, 8, 4, 4, 1
    V, multiple = 50, 8
    Vp = (V + multiple - 1) // multiple * multiple
    c = {"d_model": d, "n_layer": L, "vocab_size": V, "ssm_cfg": {"d_state": N}, "rms_norm": True, "residual_in_fp32": True,
         "fused_add_norm": True, "pad_vocab_size_multiple": multiple}
    W = mamba_weights(gen, L, d, Vp, N, R, K, "backbone.embedding.weight")
    sd = collections.OrderedDict((k, v.to(torch.float32).contiguous()) for k, v in W.items())
    sd["lm_head.weight"] = sd["backbone.embedding.weight"]
    sd._metadata = collections.OrderedDict({"": {"version": 1}})  # as Module.state_dict() sets it
    torch.save(sd, f"{out}/pytorch_model.bin")
    write_json(f"{out}/config.json", c)
    ids = torch.randint(0, V, (2, 7), generator=gen)
    W = rounded(dict(W, **{"lm_head.weight": W["backbone.embedding.weight"]}), "F32")
    return ids, mamba_logits(W, ids, L, R, N, 1e-5, "backbone.embedding.weight", "lm_head.weight")


# ---------------------------------------------------------------- GPT-Neo


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).pow(2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * w + b


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def gpt_neo_layer_kinds(c):
    kinds = []
    for pattern, repeat in c["attention_types"]:
        kinds += pattern * repeat
    return kinds


def gpt_neo_logits(c, W, ids):
    """GPTNeoForCausalLM's forward as modeling_gpt_neo.py defines it: learned
    positions, LayerNorm, attention with no 1/sqrt(d) scaling whose local
    layers see keys q - window_size < k <= q, out_proj with bias, gelu_new MLP,
    lm_head tied to wte."""
    d, H, eps, window = c["hidden_size"], c["num_heads"], c["layer_norm_epsilon"], c["window_size"]
    hd = d // H
    Bsz, T = ids.shape
    x = W["transformer.wte.weight"][ids] + W["transformer.wpe.weight"][:T][None]
    q_pos = torch.arange(T)[:, None]
    k_pos = torch.arange(T)[None, :]
    for l, kind in enumerate(gpt_neo_layer_kinds(c)):
        p, a = f"transformer.h.{l}.", f"transformer.h.{l}.attn.attention."
        h = layer_norm(x, W[p + "ln_1.weight"], W[p + "ln_1.bias"], eps)
        heads = lambda t: t.view(Bsz, T, H, hd).transpose(1, 2)
        q, k, v = (heads(h @ W[a + n + "_proj.weight"].T) for n in ("q", "k", "v"))
        scores = q @ k.transpose(-1, -2)  # GPT-Neo does not divide by sqrt(head_dim)
        allowed = k_pos <= q_pos
        if kind == "local":
            allowed = allowed & (q_pos - k_pos < window)
        scores = scores.masked_fill(~allowed, float("-inf"))
        o = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(Bsz, T, d)
        x = x + o @ W[a + "out_proj.weight"].T + W[a + "out_proj.bias"]
        h = layer_norm(x, W[p + "ln_2.weight"], W[p + "ln_2.bias"], eps)
        f = gelu_new(h @ W[p + "mlp.c_fc.weight"].T + W[p + "mlp.c_fc.bias"])
        x = x + f @ W[p + "mlp.c_proj.weight"].T + W[p + "mlp.c_proj.bias"]
    x = layer_norm(x, W["transformer.ln_f.weight"], W["transformer.ln_f.bias"], eps)
    return x @ W["transformer.wte.weight"].T


def gpt_neo_config(V):
    """EleutherAI/gpt-neo-125M's config.json, every key, at toy size:
    4 layers global/local in turn, window 3 (shorter than the 9-token test
    sequences), intermediate_size null (4 x hidden_size)."""
    L = 4
    return {
        "activation_function": "gelu_new", "architectures": ["GPTNeoForCausalLM"], "attention_dropout": 0,
        "attention_layers": ["global", "local"] * (L // 2), "attention_types": [[["global", "local"], L // 2]],
        "bos_token_id": V - 1, "embed_dropout": 0, "eos_token_id": V - 1, "gradient_checkpointing": False,
        "hidden_size": 16, "initializer_range": 0.02, "intermediate_size": None, "layer_norm_epsilon": 1e-05,
        "max_position_embeddings": 12, "model_type": "gpt_neo", "num_heads": 4, "num_layers": L,
        "resid_dropout": 0, "summary_activation": None, "summary_first_dropout": 0.1,
        "summary_proj_to_labels": True, "summary_type": "cls_index", "summary_use_proj": True,
        "torch_dtype": "float32", "transformers_version": "4.9.0.dev0", "use_cache": True, "vocab_size": V,
        "window_size": 3,
    }


def gpt_neo_weights(c, gen):
    d, V, P, L = c["hidden_size"], c["vocab_size"], c["max_position_embeddings"], c["num_layers"]
    I = 4 * d
    rnd = lambda *s, scale=0.3: torch.randn(*s, generator=gen) * scale
    W = {"transformer.wte.weight": rnd(V, d, scale=0.5), "transformer.wpe.weight": rnd(P, d, scale=0.5)}
    for l in range(L):
        p, a = f"transformer.h.{l}.", f"transformer.h.{l}.attn.attention."
        W[p + "ln_1.weight"], W[p + "ln_1.bias"] = 1 + rnd(d, scale=0.2), rnd(d, scale=0.2)
        for n in ("k", "v", "q"):
            W[a + n + "_proj.weight"] = rnd(d, d)
        W[a + "out_proj.weight"], W[a + "out_proj.bias"] = rnd(d, d), rnd(d, scale=0.2)
        W[p + "ln_2.weight"], W[p + "ln_2.bias"] = 1 + rnd(d, scale=0.2), rnd(d, scale=0.2)
        W[p + "mlp.c_fc.weight"], W[p + "mlp.c_fc.bias"] = rnd(I, d), rnd(I, scale=0.2)
        W[p + "mlp.c_proj.weight"], W[p + "mlp.c_proj.bias"] = rnd(d, I, scale=0.15), rnd(d, scale=0.2)
    W["transformer.ln_f.weight"], W["transformer.ln_f.bias"] = 1 + rnd(d, scale=0.2), rnd(d, scale=0.2)
    return W


def write_gpt2_tokenizer(out):
    """A GPT-2-shaped tokenizer.json: the 256 byte characters in GPT-2's id
    order, a few merges, <|endoftext|> last (GPT-2's 50256)."""
    vocab = {ch: i for i, ch in enumerate(bytes_to_unicode().values())}
    merges = ["Ġ t", "h e", "Ġt he", "l l", "e ll", "h ell", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld"]
    for m in merges:
        vocab[m.replace(" ", "")] = len(vocab)
    eot = len(vocab)
    vocab["<|endoftext|>"] = eot
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": eot, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": True, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "vocab": vocab, "merges": merges},
    }
    with open(f"{out}/tokenizer.json", "w") as f:
        json.dump(tok, f, ensure_ascii=False)
    write_json(f"{out}/tokenizer_config.json", {"add_prefix_space": False, "bos_token": "<|endoftext|>",
                                                "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>",
                                                "model_max_length": 2048, "tokenizer_class": "GPT2Tokenizer"})
    return len(vocab)


def make_hf_gpt_neo(out, out_bin, gen):
    V = write_gpt2_tokenizer(out)
    c = gpt_neo_config(V)
    W = gpt_neo_weights(c, gen)
    write_safetensors(f"{out}/model.safetensors", W, "F32", {"format": "pt"})
    write_json(f"{out}/config.json", c)
    # pytorch_model.bin as transformers 4.9 saved it: buffers and the tied head included.
    sd = collections.OrderedDict()
    P = c["max_position_embeddings"]
    for name, v in W.items():
        sd[name] = v.to(torch.float32).contiguous()
        if name.endswith("attn.attention.v_proj.weight"):
            mask = torch.tril(torch.ones((P, P), dtype=torch.uint8)).view(1, 1, P, P)
            sd[name.replace("v_proj.weight", "bias")] = mask
            sd[name.replace("v_proj.weight", "masked_bias")] = torch.tensor(-1e9, dtype=torch.float32)
    sd["lm_head.weight"] = sd["transformer.wte.weight"]
    sd._metadata = collections.OrderedDict({"": {"version": 1}})
    torch.save(sd, f"{out_bin}/pytorch_model.bin")
    write_json(f"{out_bin}/config.json", c)
    ids = torch.randint(0, V, (2, 9), generator=gen)
    return ids, gpt_neo_logits(c, rounded(W, "F32"), ids)


# ---------------------------------------------------------------- Qwen2


def qwen2_logits(c, W, ids):
    """Qwen2ForCausalLM's forward as modeling_qwen2.py defines it: RMSNorm,
    q/k/v projections with biases, rotate-half RoPE on whole heads, K/V heads
    repeated for their query groups, softmax(q k^T / sqrt(d)), o_proj without
    bias, SwiGLU MLP, lm_head tied to embed_tokens."""
    d, H, KV, eps = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["rms_norm_eps"]
    hd = d // H
    Bsz, T = ids.shape
    inv = 1.0 / c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    x = W["model.embed_tokens.weight"][ids]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms(x, W[p + "input_layernorm.weight"], eps)
        proj = lambda n: h @ W[p + f"self_attn.{n}_proj.weight"].T + W[p + f"self_attn.{n}_proj.bias"]
        q = rotate(proj("q").view(Bsz, T, H, hd), inv)
        k = rotate(proj("k").view(Bsz, T, KV, hd), inv)
        v = proj("v").view(Bsz, T, KV, hd)
        k, v = (t.repeat_interleave(H // KV, dim=2) for t in (k, v))
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
        o = torch.softmax(scores.masked_fill(~causal, float("-inf")), -1) @ v
        x = x + o.transpose(1, 2).reshape(Bsz, T, d) @ W[p + "self_attn.o_proj.weight"].T
        h = rms(x, W[p + "post_attention_layernorm.weight"], eps)
        f = F.silu(h @ W[p + "mlp.gate_proj.weight"].T) * (h @ W[p + "mlp.up_proj.weight"].T)
        x = x + f @ W[p + "mlp.down_proj.weight"].T
    x = rms(x, W["model.norm.weight"], eps)
    return x @ W["model.embed_tokens.weight"].T


def qwen2_config(V):
    """Qwen/Qwen2.5-0.5B's config.json, every key, at toy size."""
    return {
        "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": V - 1,
        "eos_token_id": V - 1, "hidden_act": "silu", "hidden_size": 32, "initializer_range": 0.02,
        "intermediate_size": 64, "max_position_embeddings": 128, "max_window_layers": 2, "model_type": "qwen2",
        "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0, "sliding_window": 128, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "transformers_version": "4.40.1", "use_cache": True, "use_sliding_window": False, "vocab_size": V,
    }


def make_hf_qwen2(out, gen):
    V = write_gpt2_tokenizer(out)
    c = qwen2_config(V)
    d, I, H, KV = c["hidden_size"], c["intermediate_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd = d // H
    rnd = lambda *s, scale=0.3: torch.randn(*s, generator=gen) * scale
    W = {"model.embed_tokens.weight": rnd(V, d, scale=0.5)}
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        W[p + "input_layernorm.weight"] = 1 + rnd(d, scale=0.2)
        for n, rows in (("q", H * hd), ("k", KV * hd), ("v", KV * hd)):
            W[p + f"self_attn.{n}_proj.weight"] = rnd(rows, d)
            W[p + f"self_attn.{n}_proj.bias"] = rnd(rows, scale=0.5)
        W[p + "self_attn.o_proj.weight"] = rnd(d, H * hd)
        W[p + "post_attention_layernorm.weight"] = 1 + rnd(d, scale=0.2)
        W[p + "mlp.gate_proj.weight"], W[p + "mlp.up_proj.weight"] = rnd(I, d), rnd(I, d)
        W[p + "mlp.down_proj.weight"] = rnd(d, I, scale=0.2)
    W["model.norm.weight"] = 1 + rnd(d, scale=0.2)
    write_safetensors(f"{out}/model.safetensors", W, "BF16", {"format": "pt"})
    write_json(f"{out}/config.json", c)
    ids = torch.randint(0, V, (2, 9), generator=gen)
    return ids, qwen2_logits(c, rounded(W, "BF16"), ids)


def make_qwen2(root):
    """Qwen2, from its own random stream."""
    os.makedirs(f"{root}/hf_qwen2", exist_ok=True)
    return {"hf_qwen2": make_hf_qwen2(f"{root}/hf_qwen2", torch.Generator().manual_seed(29))}


# ---------------------------------------------------------------- tokenizer


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def write_bpe_tokenizer(out):
    """A GPT-NeoX-shaped tokenizer.json: <|endoftext|> 0, <|padding|> 1, the
    256 byte characters, then a few merges."""
    vocab = {"<|endoftext|>": 0, "<|padding|>": 1}
    for b, ch in sorted(bytes_to_unicode().items(), key=lambda kv: ord(kv[1])):
        vocab[ch] = len(vocab)
    merges = ["Ġ t", "h e", "Ġt he", "l l", "e ll", "h ell", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld",
              "1 2", "' s"]
    for m in merges:
        vocab[m.replace(" ", "")] = len(vocab)
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [
            {"id": 0, "content": "<|endoftext|>", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True},
            {"id": 1, "content": "<|padding|>", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True},
        ],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "vocab": vocab, "merges": merges},
    }
    with open(f"{out}/tokenizer.json", "w") as f:
        json.dump(tok, f, ensure_ascii=False)
    write_json(f"{out}/tokenizer_config.json", {"add_bos_token": False, "add_eos_token": False,
                                                "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                                                "unk_token": "<|endoftext|>", "tokenizer_class": "GPTNeoXTokenizer"})
    return len(vocab)


def make_families(root, gen):
    """The Hymba and Mamba fixtures, from one random stream (in this order)."""
    for name in ("hf_hymba", "hf_mamba", "state_spaces_mamba", "state_spaces_mamba_bin"):
        os.makedirs(f"{root}/{name}", exist_ok=True)
    results = {}
    results["hf_hymba"] = make_hf_hymba(f"{root}/hf_hymba", gen)
    tok_vocab = write_bpe_tokenizer(f"{root}/hf_mamba")
    results["hf_mamba"] = make_hf_mamba(f"{root}/hf_mamba", gen, (tok_vocab + 7) // 8 * 8)
    results["state_spaces_mamba"] = make_state_spaces(f"{root}/state_spaces_mamba", gen)
    results["state_spaces_mamba_bin"] = make_state_spaces_bin(f"{root}/state_spaces_mamba_bin", gen)
    # A pickle that would run a shell command if unpickled: the reader must refuse it.
    os.makedirs(f"{root}/pickle_with_code", exist_ok=True)
    torch.save({"weight": torch.zeros(2), "hook": os.system}, f"{root}/pickle_with_code/pytorch_model.bin")
    return results


def make_gpt_neo(root):
    """GPT-Neo, from its own random stream (adding it changed no other fixture)."""
    for name in ("hf_gpt_neo", "hf_gpt_neo_bin"):
        os.makedirs(f"{root}/{name}", exist_ok=True)
    result = make_hf_gpt_neo(f"{root}/hf_gpt_neo", f"{root}/hf_gpt_neo_bin", torch.Generator().manual_seed(17))
    return {"hf_gpt_neo": result, "hf_gpt_neo_bin": result}


def main(root, only):
    results = {}
    if not only or set(only) - {"hf_gpt_neo", "hf_qwen2"}:
        results.update(make_families(root, torch.Generator().manual_seed(10)))
    if not only or "hf_gpt_neo" in only:
        results.update(make_gpt_neo(root))
    if not only or "hf_qwen2" in only:
        results.update(make_qwen2(root))
    for name, (ids, logits) in results.items():
        write_safetensors(f"{root}/{name}/expected.safetensors", {"ids": ids.double(), "logits": logits}, "F32")
        print(f"{name}: logits {tuple(logits.shape)}, max |logit| {logits.abs().max().item():.3f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
