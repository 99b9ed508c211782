#!/usr/bin/python3
"""A plain-PyTorch peer of `hymba synth --model mamba` on selective copying.

Trains the same Mamba-1 LM as `hymba synth --model mamba` (tied embedding,
pre-norm RMSNorm residual layers of in_proj -> causal depthwise conv1d + SiLU
-> x_proj -> dt_proj/softplus -> selective scan (a sequential loop) + D skip,
gated by SiLU(z) -> out_proj, final RMSNorm) on exactly the examples the
engine generates (its xoshiro256**/splitmix64 Rng and selective-copying
generator are re-implemented here; `--check-data` compares them with
`hymba synth --show`), with the engine trainer's recipe: the same per-epoch
shuffle, AdamW (beta2 0.999, eps 1e-8, weight decay 0.01 on the rows the
engine decays), global-norm clipping 1.0, constant lr, loss and accuracy over
the scored positions. Each flag below switches one factor to the other side
(the PyTorch-default reading of the seed 004 notebooks) to see which one
moves the epochs to eval accuracy 0.95.

Needs torch (Debian's python3-torch; `scripts/setup.sh --peers` installs it): run it with /usr/bin/python3.

  /usr/bin/python3 bench/synth_peer.py --init mamba_ssm          # engine recipe
  /usr/bin/python3 bench/synth_peer.py --init torch --decay all --clip 0
  /usr/bin/python3 bench/synth_peer.py --check-data build/release/hymba
"""
import argparse
import math
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

M64 = (1 << 64) - 1
IGNORE = -100


# ---- the engine's Rng (src/core/rng.cpp) -------------------------------------
def _splitmix(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return x, z ^ (z >> 31)


def _rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & M64


class Rng:
    def __init__(self, seed=0, key=0):
        x = (seed ^ ((key * 0xD1B54A32D192ED03) & M64)) & M64
        x, self.key = _splitmix(x)
        self.s = []
        for _ in range(4):
            x, w = _splitmix(x)
            self.s.append(w)

    def split(self, key):
        x = (self.key ^ ((key * 0x9E3779B97F4A7C15) & M64)) & M64
        _, z = _splitmix(x)
        return Rng(z, key + 1)

    def next_u64(self):
        s = self.s
        result = (_rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = _rotl(s[3], 45)
        return result

    def below(self, n):
        limit = M64 - M64 % n
        while True:
            r = self.next_u64()
            if r < limit:
                return r % n


# ---- the engine's selective-copying generator (src/synth/tasks.cpp) ----------
def selective_copying(n_examples, seed, V, L, n, placement="mad"):
    """placement "mad": MAD's rule (each of the L-2n-1 blanks inserted before a data token drawn
    from the n, none after the last), the engine's generator; "uniform": the engine's earlier
    one (n distinct positions drawn over the whole prefix), for the results measured with it."""
    base = Rng(seed)
    region, blank, copy = L - n - 1, V - 2, V - 1
    inputs, targets = [], []
    for i in range(n_examples):
        r = base.split(i)
        inp, tgt = [blank] * L, [IGNORE] * L
        if placement == "mad":
            before = [0] * n
            for _ in range(L - 2 * n - 1):
                before[r.below(n)] += 1
            t = 0
            for j in range(n):
                t += before[j]
                tok = r.below(V - 2)
                inp[t] = tok
                t += 1
                tgt[L - n + j] = tok
        else:
            pool = list(range(region))
            for j in range(n):  # partial Fisher-Yates: n distinct positions
                k = j + r.below(region - j)
                pool[j], pool[k] = pool[k], pool[j]
            where = sorted(pool[:n])
            for j in range(n):
                tok = r.below(V - 2)
                inp[where[j]] = tok
                tgt[L - n + j] = tok
        inp[region] = copy
        inputs.append(inp)
        targets.append(tgt)
    return torch.tensor(inputs), torch.tensor(targets)


def teacher_forced(x, y, n):
    """The shifted variant: the copy region's inputs hold the tokens already copied, and the
    copy token itself predicts the first one (input seq[:-1], target seq[1:] of one sequence)."""
    x, y = x.clone(), y.clone()
    x[:, -n:] = y[:, -n:]
    y = torch.cat([y[:, 1:], torch.full_like(y[:, :1], IGNORE)], 1)
    return x, y


def engine_order(n, data_rng, epoch):
    order = list(range(n))
    sh = data_rng.split(1000 + epoch)
    for i in range(n - 1, 0, -1):
        j = sh.below(i + 1)
        order[i], order[j] = order[j], order[i]
    return order


# ---- the model ----------------------------------------------------------------
class RMSNorm(torch.nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Mamba(torch.nn.Module):
    """Mamba-1 mixer as mamba_ssm's Mamba module constructs it (conv bias, no Linear biases)."""

    def __init__(self, d, d_state=16, d_conv=4, expand=2, dt_min=1e-3, dt_max=0.1):
        super().__init__()
        di, self.R, self.N = expand * d, math.ceil(d / 16), d_state
        self.in_proj = torch.nn.Linear(d, 2 * di, bias=False)
        self.conv1d = torch.nn.Conv1d(di, di, d_conv, groups=di, padding=d_conv - 1, bias=True)
        self.x_proj = torch.nn.Linear(di, self.R + 2 * d_state, bias=False)
        self.dt_proj = torch.nn.Linear(self.R, di, bias=True)
        self.out_proj = torch.nn.Linear(di, d, bias=False)
        with torch.no_grad():
            torch.nn.init.uniform_(self.dt_proj.weight, -self.R ** -0.5, self.R ** -0.5)
            dt = torch.exp(torch.rand(di) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)).clamp(min=1e-4)
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))
        self.A_log = torch.nn.Parameter(torch.log(torch.arange(1, d_state + 1, dtype=torch.float32)).repeat(di, 1))
        self.D = torch.nn.Parameter(torch.ones(di))

    def forward(self, h):
        B, L, _ = h.shape
        x, z = self.in_proj(h).chunk(2, dim=-1)
        x = F.silu(self.conv1d(x.transpose(1, 2))[..., :L].transpose(1, 2))
        dbc = self.x_proj(x)
        dt, Bm, Cm = dbc.split([self.R, self.N, self.N], dim=-1)
        dt = F.softplus(self.dt_proj(dt))  # [B, L, di]
        A = -torch.exp(self.A_log)  # [di, N]
        state = x.new_zeros(B, x.shape[-1], self.N)
        ys = []
        for t in range(L):  # the selective scan, one step at a time
            dA = torch.exp(dt[:, t, :, None] * A)
            state = dA * state + (dt[:, t] * x[:, t])[..., None] * Bm[:, t, None, :]
            ys.append((state * Cm[:, t, None, :]).sum(-1))
        y = torch.stack(ys, dim=1) + x * self.D
        return self.out_proj(y * F.silu(z))


class MambaLM(torch.nn.Module):
    def __init__(self, V, d, layers, eps):
        super().__init__()
        self.embed = torch.nn.Embedding(V, d)
        self.norms = torch.nn.ModuleList(RMSNorm(d, eps) for _ in range(layers))
        self.mixers = torch.nn.ModuleList(Mamba(d) for _ in range(layers))
        self.norm_f = RMSNorm(d, eps)

    def forward(self, ids):
        h = self.embed(ids)
        for norm, mixer in zip(self.norms, self.mixers):
            h = h + mixer(norm(h))
        return self.norm_f(h) @ self.embed.weight.t()  # tied head


def apply_init(model, scheme, std, layers):
    """Engine init schemes (src/model/layout.cpp); 'torch' keeps the module defaults."""
    with torch.no_grad():
        for m in model.mixers:
            if scheme == "normal":
                model.embed.weight.normal_(0, std)
                for lin in (m.in_proj, m.x_proj):
                    lin.weight.normal_(0, std)
                m.out_proj.weight.normal_(0, std / math.sqrt(2 * layers))
            elif scheme == "hf":  # transformers' MambaForCausalLM defaults: initializer_range 0.1, no rescaling
                model.embed.weight.normal_(0, std)
            elif scheme == "mamba_ssm":
                model.embed.weight.normal_(0, std)
                b = 1 / math.sqrt(m.out_proj.in_features * layers)
                m.out_proj.weight.uniform_(-b, b)


def decayed(name, rule):
    if rule == "all":
        return True
    if rule == "none":
        return False
    # The engine's rule: matrices, the embedding and conv weights decay; norms, biases, A_log, D do not.
    return not (name.endswith("bias") or "norm" in name or name.endswith("A_log") or name.endswith(".D"))


def run(a):
    torch.manual_seed(a.torch_seed)
    torch.set_num_threads(1)
    data_rng = Rng(a.seed)
    tr_x, tr_y = selective_copying(a.num_train, data_rng.split(11).next_u64(), a.vocab, a.seq_len, a.copy,
                                   a.placement)
    te_x, te_y = selective_copying(a.num_test, data_rng.split(12).next_u64(), a.vocab, a.seq_len, a.copy,
                                   a.placement)
    if a.teacher_forced:
        tr_x, tr_y = teacher_forced(tr_x, tr_y, a.copy)
        te_x, te_y = teacher_forced(te_x, te_y, a.copy)
    model = MambaLM(a.vocab, a.hidden, a.layers, a.norm_eps)
    apply_init(model, a.init, a.init_std, a.layers)
    groups = [{"params": [p for n, p in model.named_parameters() if decayed(n, a.decay)], "weight_decay": a.wd},
              {"params": [p for n, p in model.named_parameters() if not decayed(n, a.decay)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, a.beta2), eps=a.eps)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"peer: {nparams} params, init {a.init}, decay {a.decay} wd {a.wd}, clip {a.clip}, "
          f"eps {a.eps}, warmup {a.warmup}, order {a.order}, seed {a.seed}, teacher-forced {a.teacher_forced}", flush=True)
    step, n = 0, a.num_train
    for epoch in range(1, a.epochs + 1):
        t0 = time.time()
        order = engine_order(n, data_rng, epoch) if a.order == "engine" else torch.randperm(n).tolist()
        model.train()
        loss_sum, batches, clipped = 0.0, 0, 0
        for b in range(0, n, a.batch):
            idx = torch.tensor(order[b:b + a.batch])
            logits = model(tr_x[idx])
            loss = F.cross_entropy(logits.reshape(-1, a.vocab), tr_y[idx].reshape(-1), ignore_index=IGNORE)
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip if a.clip > 0 else float("inf"))
            clipped += int(a.clip > 0 and norm.item() > a.clip)
            for g in opt.param_groups:
                g["lr"] = a.lr * min(1.0, (step + 1) / a.warmup) if a.warmup > 0 else a.lr
            opt.step()
            step += 1
            loss_sum += loss.item()
            batches += 1
        model.eval()
        with torch.no_grad():
            logits = model(te_x).reshape(-1, a.vocab)
            y = te_y.reshape(-1)
            mask = y != IGNORE
            ev_loss = F.cross_entropy(logits[mask], y[mask]).item()
            acc = (logits[mask].argmax(-1) == y[mask]).float().mean().item()
        print(f"epoch {epoch:3d}  train loss {loss_sum / batches:.4f}  eval loss {ev_loss:.4f}  "
              f"eval acc {acc:.3f}  clipped {clipped}/{batches}  ({time.time() - t0:.1f} s)", flush=True)
        if a.stop_at_acc > 0 and acc >= a.stop_at_acc:
            print(f"reached {a.stop_at_acc} at epoch {epoch}")
            return
    print(f"did not reach {a.stop_at_acc} in {a.epochs} epochs")


def check_data(hymba, a):
    """Compares the re-implemented generator with `hymba synth --show` (seed 0)."""
    out = subprocess.run([hymba, "synth", "--task", "selective-copying", "--vocab-size", str(a.vocab), "--seq-len",
                          str(a.seq_len), "--num-tokens-to-copy", str(a.copy), "--show", "50"],
                         capture_output=True, text=True, check=True).stdout.split("test set")[0]
    rows = [line.split(":")[1].split() for line in out.splitlines() if ":" in line and "set" not in line]
    x, y = selective_copying(50, 0, a.vocab, a.seq_len, a.copy, a.placement)
    ours = []
    for i in range(50):
        ours.append([str(v) for v in x[i].tolist()])
        ours.append(["." if v == IGNORE else str(v) for v in y[i].tolist()])
    ok = rows == ours
    print("data matches hymba synth --show 50" if ok else "data DIFFERS from hymba synth --show")
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vocab", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=20)
    p.add_argument("--copy", type=int, default=5)
    p.add_argument("--placement", choices=["mad", "uniform"], default="mad",
                   help="blank placement: MAD's (the engine's now) or the engine's earlier uniform one")
    p.add_argument("--num-train", type=int, default=4000)
    p.add_argument("--num-test", type=int, default=200)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--stop-at-acc", type=float, default=0.95)
    p.add_argument("--seed", type=int, default=0, help="engine data seed (train/test sets and the shuffle)")
    p.add_argument("--torch-seed", type=int, default=0, help="initialisation seed")
    p.add_argument("--init", choices=["torch", "normal", "mamba_ssm", "hf"], default="mamba_ssm")
    p.add_argument("--init-std", type=float, default=0.02, help="embedding std (normal: also the projections)")
    p.add_argument("--decay", choices=["engine", "all", "none"], default="engine",
                   help="which tensors AdamW decays (all: torch.optim.AdamW(model.parameters()))")
    p.add_argument("--wd", type=float, default=0.01)
    p.add_argument("--beta2", type=float, default=0.999)
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--clip", type=float, default=1.0, help="global grad-norm clip (0: off)")
    p.add_argument("--warmup", type=int, default=0)
    p.add_argument("--norm-eps", type=float, default=1e-6)
    p.add_argument("--order", choices=["engine", "torch"], default="engine")
    p.add_argument("--teacher-forced", action="store_true",
                   help="the copy region's inputs are the copied tokens (a shifted next-token task)")
    p.add_argument("--check-data", metavar="HYMBA", help="compare the generator with this hymba binary and exit")
    a = p.parse_args()
    if a.check_data:
        sys.exit(0 if check_data(a.check_data, a) else 1)
    run(a)


if __name__ == "__main__":
    main()
