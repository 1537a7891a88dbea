#!/usr/bin/python3
"""PyTorch reference for `longctx bench --peer=pytorch`.

Why: a speed figure means little without a peer run on the same machine, in
the same invocation, on the same model. This script builds the architecture
longctx trains from the shape longctx hands it (JSON on --spec): pre-norm Llama
blocks (RMSNorm with the config's eps), RoPE with rotate-half pairing (dim j
with j + rope_dim/2) over the first rope_dim dims of each head, GQA (query head
h reads kv head h // group), per-layer attention kind (RoPE full, RoPE sliding
window of w keys = the query and its w-1 predecessors, NoPE full), SwiGLU MLP,
untied LM head (tied when the config ties), mean cross-entropy, and AdamW with
the config's betas/eps/weight decay (matrices decayed, norm weights not, as
longctx's default) after global-norm clipping. q|k|v and gate|up are fused
linear layers, as in longctx, so both systems run the same GEMM shapes.
Attention is plain PyTorch 1.13 (no fused SDPA exists in 1.13): scores,
additive mask, softmax, product; its FLOPs are not counted any differently:
the FLOPs per token come from longctx (spec "flops_per_token").

Times the median of --steps full training steps (zero_grad, forward, backward,
clip, AdamW) after --warmup untimed steps on random tokens (one causal segment
per row, positions 0..T-1, as longctx's synthetic batch). Prints one JSON line.

Run with Debian's interpreter (/usr/bin/python3) and python3-torch
(scripts/setup_bench.sh installs it).
"""
import argparse
import json
import math
import os
import resource
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spec", required=True, help="JSON model/run shape (written by longctx bench)")
    ap.add_argument("--count_params", action="store_true", help="print the parameter count as JSON and exit")
    ap.add_argument("--weights", help="check mode: load these longctx weights (model.safetensors, F32, Hugging Face names)")
    ap.add_argument("--batch", help="check mode: JSON {\"ids\": [[...]], \"targets\": [[...]]} of shape [B, T]; "
                    "prints the loss and the gradient norm of every tensor (Hugging Face names) as JSON and exits")
    args = ap.parse_args()
    spec = json.loads(args.spec)

    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        sys.stderr.write("torch_reference.py: error: cannot import torch (%s); install Debian's python3-torch "
                         "(scripts/setup_bench.sh) and run with /usr/bin/python3\n" % e)
        return 2

    threads = int(spec.get("threads", 0)) or os.cpu_count()
    torch.set_num_threads(threads)
    torch.manual_seed(int(spec.get("seed", 42)))

    D, L = spec["hidden"], spec["layers"]
    H, Hkv, hd = spec["heads"], spec["kv_heads"], spec["head_dim"]
    Fh, V = spec["ffn"], spec["vocab"]
    eps, theta = spec["rms_norm_eps"], spec["rope_theta"]
    rope_dim = spec.get("rope_dim", hd) or hd
    kinds, window = spec["kinds"], spec.get("window", 0)
    tied, qk_norm = spec.get("tied", False), spec.get("qk_norm", False)
    B, T = spec["batch_size"], spec["seq_len"]
    precision = spec.get("precision", "fp32")
    if precision not in ("fp32", "bf16"):
        sys.stderr.write("torch_reference.py: error: precision must be fp32 or bf16, got %r\n" % precision)
        return 2
    group = H // Hkv
    init_std = spec.get("init_std", 0) or math.sqrt(2.0 / (5.0 * D))

    class RMSNorm(torch.nn.Module):
        def __init__(self, n):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(n))

        def forward(self, x):
            xf = x.float()
            return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * self.weight

    def linear(n_in, n_out):
        lin = torch.nn.Linear(n_in, n_out, bias=False)
        torch.nn.init.normal_(lin.weight, std=init_std)
        return lin

    # RoPE tables for positions 0..T-1: angle(t, j) = t * theta^(-2j/rope_dim).
    inv_freq = theta ** (-torch.arange(0, rope_dim, 2, dtype=torch.float64) / rope_dim)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1).float()  # [T, rope_dim]
    sin = torch.cat([ang.sin(), ang.sin()], -1).float()

    def rope(x):  # x [B, heads, T, hd]
        xr, xp = x[..., :rope_dim], x[..., rope_dim:]
        x1, x2 = xr[..., : rope_dim // 2], xr[..., rope_dim // 2:]
        rot = torch.cat([-x2, x1], -1)
        out = xr * cos + rot * sin
        return torch.cat([out, xp], -1) if rope_dim < hd else out

    idx = torch.arange(T)
    causal = idx[None, :] <= idx[:, None]
    masks = {}
    for kind in set(kinds):
        allowed = causal & ((idx[:, None] - idx[None, :]) < window) if kind == "ROPE_SWA" else causal
        masks[kind] = torch.zeros(T, T).masked_fill(~allowed, float("-inf"))

    class Block(torch.nn.Module):
        def __init__(self, kind):
            super().__init__()
            self.kind = kind
            self.attn_norm = RMSNorm(D)
            self.wqkv = linear(D, (H + 2 * Hkv) * hd)
            self.wo = linear(H * hd, D)
            torch.nn.init.normal_(self.wo.weight, std=1.0 / math.sqrt(D) / L)
            if qk_norm:
                self.q_norm, self.k_norm = RMSNorm(hd), RMSNorm(hd)
            self.mlp_norm = RMSNorm(D)
            self.w_gate_up = linear(D, 2 * Fh)
            self.w_down = linear(Fh, D)
            torch.nn.init.normal_(self.w_down.weight, std=1.0 / math.sqrt(D) / L)

        def forward(self, x):
            qkv = self.wqkv(self.attn_norm(x))
            q, k, v = qkv.split([H * hd, Hkv * hd, Hkv * hd], dim=-1)
            q = q.view(B, T, H, hd).transpose(1, 2)
            k = k.view(B, T, Hkv, hd).transpose(1, 2)
            v = v.view(B, T, Hkv, hd).transpose(1, 2)
            if qk_norm:
                q, k = self.q_norm(q), self.k_norm(k)
            if self.kind != "NOPE_FULL":
                q, k = rope(q), rope(k)
            k = k.repeat_interleave(group, dim=1)
            v = v.repeat_interleave(group, dim=1)
            s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(hd)) + masks[self.kind]
            p = torch.softmax(s.float(), dim=-1).to(v.dtype)
            o = torch.matmul(p, v).transpose(1, 2).reshape(B, T, H * hd)
            x = x + self.wo(o)
            gate, up = self.w_gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
            return x + self.w_down(F.silu(gate) * up)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(V, D)
            torch.nn.init.normal_(self.embed.weight, std=init_std)
            self.blocks = torch.nn.ModuleList([Block(k) for k in kinds])
            self.norm = RMSNorm(D)
            self.head = None if tied else linear(D, V)

        def forward(self, ids, targets):
            x = self.embed(ids)
            for blk in self.blocks:
                x = blk(x)
            x = self.norm(x)
            w = self.embed.weight if tied else self.head.weight
            logits = F.linear(x, w)
            return F.cross_entropy(logits.float().view(-1, V), targets.view(-1))

    model = Model()
    n_params = sum(p.numel() for p in model.parameters())
    if args.count_params:
        print(json.dumps({"params": n_params}))
        return 0

    if args.weights or args.batch:
        if not (args.weights and args.batch):
            sys.stderr.write("torch_reference.py: error: --weights and --batch go together\n")
            return 2
        return check(torch, model, args.weights, args.batch, L, H, Hkv, hd, Fh, tied, qk_norm)

    decay_norms = bool(spec.get("decay_norms", False))
    decay = [p for p in model.parameters() if p.dim() >= 2 or decay_norms]
    no_decay = [p for p in model.parameters() if p.dim() < 2 and not decay_norms]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": spec["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=spec["lr"], betas=(spec["beta1"], spec["beta2"]), eps=spec["eps"])
    clip = spec.get("grad_clip", 0.0)
    gen = torch.Generator().manual_seed(int(spec.get("seed", 42)) + 1)
    ids = torch.randint(0, V, (B, T), generator=gen)
    targets = torch.randint(0, V, (B, T), generator=gen)

    def step():
        opt.zero_grad(set_to_none=False)
        if precision == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(ids, targets)
        else:
            loss = model(ids, targets)
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        return loss.item()

    warmup, steps = int(spec.get("warmup", 2)), int(spec.get("steps", 10))
    loss = float("nan")
    for _ in range(warmup):
        loss = step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t0)
    median = statistics.median(times)
    tokens = B * T
    out = {
        "system": "pytorch",
        "torch_version": torch.__version__,
        "precision": precision,
        "autocast": "torch.autocast('cpu', dtype=torch.bfloat16)" if precision == "bf16" else "none",
        "threads": torch.get_num_threads(),
        "params": n_params,
        "tokens_per_step": tokens,
        "steps": steps,
        "warmup": warmup,
        "step_seconds_median": median,
        "step_seconds_min": min(times),
        "step_seconds_max": max(times),
        "tokens_per_s": tokens / median,
        "flops_per_token": spec.get("flops_per_token", 0.0),
        "gflops": spec.get("flops_per_token", 0.0) * tokens / median / 1e9,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "last_loss": loss,
    }
    print(json.dumps(out))
    return 0


def read_safetensors(torch, path):
    """name -> float32 tensor of a safetensors file (F32 entries only)."""
    with open(path, "rb") as f:
        blob = f.read()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise ValueError("%s: %s is %s, the check needs F32" % (path, name, info["dtype"]))
        a, b = info["data_offsets"]
        t = torch.frombuffer(bytearray(blob[base + a:base + b]), dtype=torch.float32)
        out[name] = t.reshape(info["shape"]).clone()
    return out


def hf_slices(model, L, H, Hkv, hd, Fh, tied, qk_norm):
    """Hugging Face name -> (parameter, row slice) of this model's fused tensors."""
    m = {"model.embed_tokens.weight": (model.embed.weight, None), "model.norm.weight": (model.norm.weight, None)}
    if not tied:
        m["lm_head.weight"] = (model.head.weight, None)
    for l, blk in enumerate(model.blocks):
        p = "model.layers.%d." % l
        m[p + "input_layernorm.weight"] = (blk.attn_norm.weight, None)
        m[p + "self_attn.q_proj.weight"] = (blk.wqkv.weight, slice(0, H * hd))
        m[p + "self_attn.k_proj.weight"] = (blk.wqkv.weight, slice(H * hd, (H + Hkv) * hd))
        m[p + "self_attn.v_proj.weight"] = (blk.wqkv.weight, slice((H + Hkv) * hd, (H + 2 * Hkv) * hd))
        m[p + "self_attn.o_proj.weight"] = (blk.wo.weight, None)
        if qk_norm:
            m[p + "self_attn.q_norm.weight"] = (blk.q_norm.weight, None)
            m[p + "self_attn.k_norm.weight"] = (blk.k_norm.weight, None)
        m[p + "post_attention_layernorm.weight"] = (blk.mlp_norm.weight, None)
        m[p + "mlp.gate_proj.weight"] = (blk.w_gate_up.weight, slice(0, Fh))
        m[p + "mlp.up_proj.weight"] = (blk.w_gate_up.weight, slice(Fh, 2 * Fh))
        m[p + "mlp.down_proj.weight"] = (blk.w_down.weight, None)
    return m


def check(torch, model, weights, batch_path, L, H, Hkv, hd, Fh, tied, qk_norm):
    """Loads longctx's weights, runs forward + backward on one batch, prints
    {"loss", "grad_norms": {name: norm}} (fp32, the model's own code)."""
    tensors = read_safetensors(torch, weights)
    slices = hf_slices(model, L, H, Hkv, hd, Fh, tied, qk_norm)
    missing = sorted(set(slices) - set(tensors))
    extra = sorted(set(tensors) - set(slices))
    if missing or extra:
        sys.stderr.write("torch_reference.py: error: %s: missing %s, unexpected %s\n" % (weights, missing, extra))
        return 2
    with torch.no_grad():
        for name, (param, rows) in slices.items():
            (param if rows is None else param[rows]).copy_(tensors[name])
    with open(batch_path) as f:
        b = json.load(f)
    ids, targets = torch.tensor(b["ids"]), torch.tensor(b["targets"])
    model.zero_grad()
    loss = model(ids, targets)
    loss.backward()
    norms = {}
    for name, (param, rows) in slices.items():
        g = param.grad if rows is None else param.grad[rows]
        norms[name] = g.double().norm().item()
    print(json.dumps({"system": "pytorch", "loss": loss.item(), "grad_norms": norms}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
