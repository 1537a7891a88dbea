#!/usr/bin/python3
"""Independent PyTorch reading of a Hugging Face Llama / Mistral / SmolLM3 checkpoint.

Why: `longctx convert` claims an exported directory is the same model when
transformers loads it, and that an imported one is the model transformers
would run. transformers is not installed here, so this script re-implements
what its LlamaForCausalLM, MistralForCausalLM and SmolLM3ForCausalLM compute,
from config.json and the safetensors files alone (it never reads a longctx
file), and longctx's tests compare losses with it (tests/convert/).

What it reads, as transformers defines it:
  * architectures[0] picks the class; head_dim (default hidden/heads),
    num_key_value_heads (GQA: query head h reads kv head h // (H / Hkv)),
    rms_norm_eps, rope_theta, tie_word_embeddings (lm_head = embed_tokens).
  * RoPE: inv_freq = theta^(-2j/head_dim), cos/sin of cat(freqs, freqs),
    q * cos + rotate_half(q) * sin (pairs j, j + head_dim/2), positions 0..T-1.
  * Llama: every layer RoPE, causal full attention (layer_types,
    sliding_window, no_rope_layers are not read).
  * Mistral: every layer slides when sliding_window is not null.
  * SmolLM3: layer l uses RoPE iff no_rope_layers[l] == 1 (default: every
    no_rope_layer_interval-th layer is NoPE); slides iff
    layer_types[l] == "sliding_attention" (default: NoPE layers slide when
    use_sliding_window and sliding_window are set).
  * Sliding window w: query i sees key j iff 0 <= i - j < w.
  * Weights: model.safetensors or model.safetensors.index.json shards; F32,
    BF16, F16 widened exactly; the forward runs in float64.

Modes:
  loss --model DIR --tokens JSON   {"ids": [[...]], "targets": [[...]]}; prints
                                   {"loss": mean cross-entropy} (one causal
                                   segment per row).
  make --out DIR --arch llama|mistral|smollm3 [--dtype bf16|f32|f16]
       [--shards N] [--tied] [--seed S]
                                   writes a random-weight checkpoint (config.json,
                                   shards + index when N > 1).
"""
import argparse
import json
import math
import os
import struct
import sys

DTYPE_BYTES = {"F32": 4, "BF16": 2, "F16": 2}


def read_safetensors(path, torch):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        raw = bytearray(blob[base + a:base + b])
        dt = info["dtype"]
        if dt == "F32":
            t = torch.frombuffer(raw, dtype=torch.float32)
        elif dt == "BF16":  # exact widening: the 16 bits become the high half of a float32
            t = (torch.frombuffer(raw, dtype=torch.int16).to(torch.int32) << 16).view(torch.float32)
        elif dt == "F16":
            t = torch.frombuffer(raw, dtype=torch.float16).to(torch.float32)
        else:
            raise SystemExit("hf_reference.py: %s: tensor %s has dtype %s" % (path, name, dt))
        out[name] = t.reshape(info["shape"]).to(torch.float64)
    return out


def load_weights(model_dir, torch):
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        files = sorted(set(json.load(open(index))["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    w = {}
    for f in files:
        w.update(read_safetensors(os.path.join(model_dir, f), torch))
    return w


def layer_plan(cfg):
    """(uses_rope, window or 0) per layer, as the config's class reads it."""
    arch = cfg["architectures"][0]
    L = cfg["num_hidden_layers"]
    if arch == "LlamaForCausalLM":
        return [(True, 0)] * L
    if arch == "MistralForCausalLM":
        w = cfg.get("sliding_window")
        return [(True, w or 0)] * L
    if arch == "SmolLM3ForCausalLM":
        rope = cfg.get("no_rope_layers")
        if rope is None:
            k = cfg.get("no_rope_layer_interval", 4)
            rope = [int((i + 1) % k != 0) for i in range(L)]
        types = cfg.get("layer_types")
        sw = cfg.get("sliding_window")
        if types is None:
            types = ["sliding_attention" if cfg.get("use_sliding_window") and sw is not None and not rope[i]
                     else "full_attention" for i in range(L)]
        return [(bool(rope[i]), sw if types[i] == "sliding_attention" else 0) for i in range(L)]
    raise SystemExit("hf_reference.py: unknown architecture %s" % arch)


def loss(model_dir, tokens, torch):
    F = torch.nn.functional
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    W = load_weights(model_dir, torch)
    D, H = cfg["hidden_size"], cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads") or H
    hd = cfg.get("head_dim") or D // H
    eps = cfg.get("rms_norm_eps", 1e-6)
    theta = cfg.get("rope_theta", 10000.0)
    plan = layer_plan(cfg)
    ids = torch.tensor(tokens["ids"], dtype=torch.long)
    targets = torch.tensor(tokens["targets"], dtype=torch.long)
    B, T = ids.shape

    def norm(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = emb.cos(), emb.sin()

    def rotate_half(x):
        return torch.cat([-x[..., hd // 2:], x[..., :hd // 2]], dim=-1)

    i = torch.arange(T).unsqueeze(1)
    j = torch.arange(T).unsqueeze(0)
    x = W["model.embed_tokens.weight"][ids]
    for l, (use_rope, window) in enumerate(plan):
        p = "model.layers.%d." % l
        h = norm(x, W[p + "input_layernorm.weight"])
        q = (h @ W[p + "self_attn.q_proj.weight"].T).view(B, T, H, hd).transpose(1, 2)
        k = (h @ W[p + "self_attn.k_proj.weight"].T).view(B, T, Hkv, hd).transpose(1, 2)
        v = (h @ W[p + "self_attn.v_proj.weight"].T).view(B, T, Hkv, hd).transpose(1, 2)
        if use_rope:
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // Hkv, dim=1)
        v = v.repeat_interleave(H // Hkv, dim=1)
        allowed = j <= i
        if window:
            allowed = allowed & (i - j < window)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
        s = s.masked_fill(~allowed, float("-inf"))
        a = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, H * hd)
        x = x + a @ W[p + "self_attn.o_proj.weight"].T
        h = norm(x, W[p + "post_attention_layernorm.weight"])
        g = h @ W[p + "mlp.gate_proj.weight"].T
        u = h @ W[p + "mlp.up_proj.weight"].T
        x = x + (F.silu(g) * u) @ W[p + "mlp.down_proj.weight"].T
    x = norm(x, W["model.norm.weight"])
    head = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else W["lm_head.weight"]
    logits = x @ head.T
    return F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1)).item()


def write_safetensors(path, tensors, torch):
    header, chunks, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        dt, t = tensors[name]
        raw = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(chunks))


def make(args, torch):
    torch.manual_seed(args.seed)
    D, L, H, Hkv, hd, Fh, V = 32, 4, 4, 2, 8, 64, 260
    arch = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "smollm3": "SmolLM3ForCausalLM"}[args.arch]
    cfg = {"architectures": [arch], "model_type": args.arch, "vocab_size": V, "hidden_size": D,
           "intermediate_size": Fh, "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": Hkv,
           "head_dim": hd, "hidden_act": "silu", "max_position_embeddings": 64, "rms_norm_eps": 1e-5,
           "rope_theta": 10000.0, "tie_word_embeddings": args.tied, "torch_dtype": "bfloat16",
           "bos_token_id": 1, "eos_token_id": 2}
    if args.arch == "mistral":
        cfg["sliding_window"] = 8
    if args.arch == "smollm3":
        # RNoPE-SWA 1:3: layers 0-2 RoPE with a window of 8, layer 3 NoPE full.
        cfg.update({"no_rope_layers": [1, 1, 1, 0], "use_sliding_window": True, "sliding_window": 8,
                    "layer_types": ["sliding_attention"] * 3 + ["full_attention"]})
    shapes = {"model.embed_tokens.weight": [V, D], "model.norm.weight": [D]}
    if not args.tied:
        shapes["lm_head.weight"] = [V, D]
    for l in range(L):
        p = "model.layers.%d." % l
        shapes.update({p + "input_layernorm.weight": [D], p + "post_attention_layernorm.weight": [D],
                       p + "self_attn.q_proj.weight": [H * hd, D], p + "self_attn.k_proj.weight": [Hkv * hd, D],
                       p + "self_attn.v_proj.weight": [Hkv * hd, D], p + "self_attn.o_proj.weight": [D, H * hd],
                       p + "mlp.gate_proj.weight": [Fh, D], p + "mlp.up_proj.weight": [Fh, D],
                       p + "mlp.down_proj.weight": [D, Fh]})
    tensors = {}
    for name, shape in shapes.items():
        t = (1.0 + 0.1 * torch.randn(shape)) if len(shape) == 1 else 0.2 * torch.randn(shape)
        if args.dtype == "bf16":
            tensors[name] = ("BF16", t.to(torch.bfloat16).view(torch.int16))
        elif args.dtype == "f16":
            tensors[name] = ("F16", t.to(torch.float16))
        else:
            tensors[name] = ("F32", t)
    os.makedirs(args.out, exist_ok=True)
    json.dump(cfg, open(os.path.join(args.out, "config.json"), "w"), indent=2)
    names = sorted(tensors)
    if args.shards <= 1:
        write_safetensors(os.path.join(args.out, "model.safetensors"), tensors, torch)
    else:
        weight_map, total = {}, 0
        for s in range(args.shards):
            part = {n: tensors[n] for n in names[s::args.shards]}
            fname = "model-%05d-of-%05d.safetensors" % (s + 1, args.shards)
            write_safetensors(os.path.join(args.out, fname), part, torch)
            for n, (_, t) in part.items():
                weight_map[n] = fname
                total += t.numel() * t.element_size()
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map},
                  open(os.path.join(args.out, "model.safetensors.index.json"), "w"), indent=2)
    print(json.dumps({"written": args.out, "tensors": len(tensors)}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["loss", "make"])
    ap.add_argument("--model")
    ap.add_argument("--tokens")
    ap.add_argument("--out")
    ap.add_argument("--arch", choices=["llama", "mistral", "smollm3"])
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f32", "f16"])
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--tied", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        sys.stderr.write("hf_reference.py: error: cannot import torch (%s); install Debian's python3-torch\n" % e)
        return 2
    torch.set_num_threads(1)
    if args.mode == "make":
        make(args, torch)
    else:
        print(json.dumps({"loss": loss(args.model, json.load(open(args.tokens)), torch)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
