#!/usr/bin/env python3
"""GPU peer for `longctx bench attention --backend=cuda --precision=bf16`.

Why: the CUDA attention's fraction of the bf16 GEMM peak says how far it is
from the hardware, not how far from what a well-kept library reaches on the
same machine. This script times PyTorch's fused attention, forced to its
FlashAttention-2 kernel (torch.nn.attention.SDPBackend.FLASH_ATTENTION), on
the shape longctx's bench times: one causal segment of L tokens, `heads`
query heads of `head_dim`, bf16 operands, forward then backward of a random
upstream gradient. GQA is given to it as key/value heads repeated to the query
heads (the same products). FLOPs are counted as longctx counts them
(train/bench/bench_attention.cc): 6 L (L + 1) head_dim heads for forward plus
backward, causal. It measures the bf16 matrix-multiply peak too (torch.matmul,
8192^3, best of 10), as longctx measures cuBLAS's, so both fractions are
against a peak taken on the same machine in the same minute.

Sliding windows are not timed: SDPA's flash kernel takes no window.

Needs a CUDA GPU and PyTorch >= 2.3 (torch.nn.attention). Prints one JSON line
per length, then nothing else.
  python3 bench/torch_attention_peer.py --lengths=16384,65536 --heads=8 --head_dim=64
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def timed(fn, repeats):
    """Median milliseconds of fn() over repeats, after two warm-ups, by CUDA events."""
    for _ in range(2):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), min(times)


def bf16_peak_gflops():
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    _, best = timed(lambda: a @ b, 10)
    return 2.0 * n**3 / (best * 1e-3) / 1e9


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", default="16384,65536")
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--head_dim", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("torch_attention_peer: no CUDA device")
    peak = bf16_peak_gflops()
    h, d = args.heads, args.head_dim
    for length in (int(x) for x in args.lengths.split(",")):
        gen = torch.Generator(device="cuda").manual_seed(length)
        shape = (1, h, length, d)
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=gen).requires_grad_()
                   for _ in range(3))
        d_o = torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=gen)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            fwd_ms, _ = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), args.repeats)

            def step():
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                o.backward(d_o)

            step_ms, step_best = timed(step, args.repeats)
        flops = 6.0 * length * (length + 1) * d * h
        gflops = flops / (step_ms * 1e-3) / 1e9
        print(json.dumps({
            "peer": "torch.nn.functional.scaled_dot_product_attention (FLASH_ATTENTION)",
            "torch": torch.__version__, "device": torch.cuda.get_device_name(),
            "seq_len": length, "heads": h, "head_dim": d, "causal": True,
            "fwd_ms": fwd_ms, "fwd_bwd_ms": step_ms, "fwd_bwd_best_ms": step_best,
            "attn_flops": flops, "attn_gflops": gflops,
            "bf16_peak_gflops": peak, "attn_fraction_of_peak": gflops / peak,
        }), flush=True)


if __name__ == "__main__":
    main()
