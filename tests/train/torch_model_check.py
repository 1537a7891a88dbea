#!/usr/bin/python3
"""The test's own PyTorch model of longctx's architecture, for elementwise checks.

Why: a gradient check against norms alone passes a transposed or permuted
gradient, and one causal segment per row never exercises the parts longctx
adds to a Llama block. This script is an independent statement of the model,
written from the definitions (SPECS.md, model/config.proto) in plain PyTorch
with explicit masks and position tables, sharing no code with longctx:

  * packed rows: several documents per row, attention only inside a document
    (segment ids), RoPE at the per-document positions the batch gives;
  * per-layer kinds: ROPE_FULL, ROPE_SWA (the query and its window-1
    predecessors), NOPE_FULL; GQA (query head h reads kv head h // group);
  * QK-Norm (RMSNorm of q and k per head, before RoPE); tied embeddings;
  * RoPER on RoPE layers: v rotated by its position j, the attention output
    by minus the query's position (rotate-half over the first roper_dim dims);
  * STRING (inference, loss only) on RoPE layers whose window is 0 or > S:
    distance d < S scores q at its position i, d >= S scores q at i - S + W
    (keys always at their own positions), one softmax over both; with RoPER
    each part's output is rotated back by its own query position;
  * loss: mean cross-entropy over targets >= 0.

  torch_model_check.py --model M.json --weights W.safetensors --batch B.json --grads_out G.safetensors

M.json: hidden, layers, heads, kv_heads, head_dim, ffn, vocab, rms_norm_eps,
rope_theta, rope_dim, window, kinds[], tied, qk_norm, roper, roper_dim,
string {s, w} or null. B.json: ids, targets, segments, positions, each [B][T].
Prints {"loss": L} and, unless STRING is on, writes every parameter's
gradient (Hugging Face names, F32) to --grads_out.
"""
import argparse
import json
import math
import struct
import sys

import torch


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", (name, info["dtype"])
        a, b = info["data_offsets"]
        out[name] = torch.frombuffer(bytearray(blob[8 + n + a:8 + n + b]), dtype=torch.float32).reshape(info["shape"]).clone()
    return out


def write_safetensors(path, tensors):
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors):
        data = tensors[name].detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for c in chunks:
            f.write(c)


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate(x, pos, dim, theta, sign):
    """Rotate-half RoPE of the first `dim` dims of x [..., T, hd] by sign * pos [T] (float64 angles)."""
    inv = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    ang = sign * pos.to(torch.float64)[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1).float()
    sin = torch.cat([ang.sin(), ang.sin()], -1).float()
    xr, xp = x[..., :dim], x[..., dim:]
    x1, x2 = xr[..., : dim // 2], xr[..., dim // 2:]
    out = xr * cos + torch.cat([-x2, x1], -1) * sin
    return torch.cat([out, xp], -1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--batch", required=True)
    ap.add_argument("--grads_out")
    a = ap.parse_args()
    torch.set_num_threads(1)
    with open(a.model) as f:
        m = json.load(f)
    with open(a.batch) as f:
        b = json.load(f)
    W = read_safetensors(a.weights)
    for t in W.values():
        t.requires_grad_(True)
    D, H, Hkv, hd = m["hidden"], m["heads"], m["kv_heads"], m["head_dim"]
    eps, theta = m["rms_norm_eps"], m["rope_theta"]
    rope_dim = m["rope_dim"] or hd
    roper, roper_dim = m["roper"], m["roper_dim"] or hd
    string = m.get("string")
    group = H // Hkv
    ids, targets = torch.tensor(b["ids"]), torch.tensor(b["targets"])
    seg, pos = torch.tensor(b["segments"]), torch.tensor(b["positions"])
    B, T = ids.shape

    x = W["model.embed_tokens.weight"][ids]  # [B, T, D]
    for l, kind in enumerate(m["kinds"]):
        p = "model.layers.%d." % l
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        q = (h @ W[p + "self_attn.q_proj.weight"].T).view(B, T, H, hd).transpose(1, 2)
        k = (h @ W[p + "self_attn.k_proj.weight"].T).view(B, T, Hkv, hd).transpose(1, 2)
        v = (h @ W[p + "self_attn.v_proj.weight"].T).view(B, T, Hkv, hd).transpose(1, 2)
        if m["qk_norm"]:
            q = rms_norm(q, W[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, W[p + "self_attn.k_norm.weight"], eps)
        uses_rope = kind != "NOPE_FULL"
        window = m["window"] if kind == "ROPE_SWA" else 0
        outs = []
        for r in range(B):
            pr = pos[r]
            qr, kr, vr = q[r], k[r], v[r]  # [heads, T, hd]
            if uses_rope:
                kr = rotate(kr, pr, rope_dim, theta, +1)
                if roper:
                    vr = rotate(vr, pr, roper_dim, theta, +1)
            kr = kr.repeat_interleave(group, dim=0)
            vr = vr.repeat_interleave(group, dim=0)
            i_idx = torch.arange(T)
            dist = pr[:, None] - pr[None, :]  # query position - key position
            visible = (seg[r][:, None] == seg[r][None, :]) & (i_idx[None, :] <= i_idx[:, None])
            if window > 0:
                visible &= dist < window
            active = string is not None and uses_rope and (window == 0 or window > string["s"])
            if not active:
                qq = rotate(qr, pr, rope_dim, theta, +1) if uses_rope else qr
                s = (qq @ kr.transpose(-1, -2)) / math.sqrt(hd)
                s = s.masked_fill(~visible, float("-inf"))
                o = torch.softmax(s, -1) @ vr
                if uses_rope and roper:
                    o = rotate(o, pr, roper_dim, theta, -1)
            else:
                S, Wd = string["s"], string["w"]
                near, far = visible & (dist < S), visible & (dist >= S)
                shifted = pr - S + Wd
                s1 = (rotate(qr, pr, rope_dim, theta, +1) @ kr.transpose(-1, -2)) / math.sqrt(hd)
                s2 = (rotate(qr, shifted, rope_dim, theta, +1) @ kr.transpose(-1, -2)) / math.sqrt(hd)
                s = torch.cat([s1.masked_fill(~near, float("-inf")), s2.masked_fill(~far, float("-inf"))], -1)
                pr_all = torch.softmax(s, -1)
                o1, o2 = pr_all[..., :T] @ vr, pr_all[..., T:] @ vr
                if roper:
                    o1, o2 = rotate(o1, pr, roper_dim, theta, -1), rotate(o2, shifted, roper_dim, theta, -1)
                o = o1 + o2
            outs.append(o.transpose(0, 1).reshape(T, H * hd))
        x = x + torch.stack(outs) @ W[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        gate, up = h @ W[p + "mlp.gate_proj.weight"].T, h @ W[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ W[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if m["tied"] else W["lm_head.weight"]
    logits = x @ head.T
    loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1), ignore_index=-1)
    if string is None and a.grads_out:
        loss.backward()
        write_safetensors(a.grads_out, {n: t.grad for n, t in W.items()})
    print(json.dumps({"loss": loss.item()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
