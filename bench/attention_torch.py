#!/usr/bin/env python3
"""PyTorch's CPU scaled-dot-product attention (its flash-based kernel),
timed on the shapes of Loom's runtime benchmark (loomrt-attention-bench):
q [B, Hq, T, D], k and v [B, Hkv, T, D], causal, f32. Prints the median
forward time and the median backward time (forward + backward minus
forward), as loomrt-attention-bench does for Loom's kernels.

    .venv/bin/python bench/attention_torch.py --threads 2 --seq 2048
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F


def median_ms(fn, runs):
    fn()  # warm-up
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    q = torch.randn(a.batch, a.heads, a.seq, a.dim, requires_grad=True)
    k = torch.randn(a.batch, a.kv_heads, a.seq, a.dim, requires_grad=True)
    v = torch.randn(a.batch, a.kv_heads, a.seq, a.dim, requires_grad=True)
    gqa = a.heads != a.kv_heads

    def forward():
        with torch.no_grad():
            F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           enable_gqa=gqa)

    def both():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                             enable_gqa=gqa)
        out.backward(torch.ones_like(out))

    fwd = median_ms(forward, a.runs)
    total = median_ms(both, a.runs)
    print("torch %s SDPA B=%d Hq=%d Hkv=%d T=S=%d D=%d causal, f32, %d threads"
          % (torch.__version__, a.batch, a.heads, a.kv_heads, a.seq, a.dim,
             a.threads))
    print("  forward  median %8.2f ms" % fwd)
    print("  backward median %8.2f ms (forward + backward %.2f ms)"
          % (total - fwd, total))


if __name__ == "__main__":
    main()
