"""GEMM time from the GEMM's shape: tile quantisation and a per-GEMM roofline.

A layer's GEMMs on one device of a t-way tensor group, T = b s tokens (Megatron
column/row split; K and V are g/a of Q; a gated MLP merges gate and up):

    QKV       M = T, K = h,    N = h (1 + 2 g/a) / t
    out proj  M = T, K = h/t,  N = h
    MLP up    M = T, K = h,    N = (k - 1) f / t      (k = 3 gated, 2 plain)
    MLP down  M = T, K = f/t,  N = h

Each takes max(2 M N K / (peak * gemm_efficiency * q), 2 (M K + K N + M N) / HBM):
compute at the large-GEMM efficiency derated by tile quantisation
q = prod_{d in M, N} d / (ceil(d / TILE) TILE) (output tiles are computed whole), or
streaming its operands and result once when it is memory-bound (small dimensions).
NVIDIA, "Matrix Multiplication Background User's Guide" (docs.nvidia.com/deeplearning/
performance/dl-performance-matrix-multiplication, sections "Math and memory bounds" and
"Tile quantization"); TILE = 128, the edge of cuBLAS's large tensor-core tiles (128 x 128,
128 x 256) in that guide.
"""
from __future__ import annotations

import numpy as np
from hwmodels.select import where

TILE = 128.0
BYTES = 2.0   # 16-bit operands


def tile_quantisation(d):
    d = np.asarray(d, dtype=float)
    return d / (np.ceil(d / TILE) * TILE)


def layer_gemm_shapes(tokens, hidden, heads, kv_heads, ffn, gated, tp):
    """(M, N, K) of the layer's forward GEMMs on one device (list of four tuples)."""
    kvr = kv_heads / heads
    up = where(gated, 2.0, 1.0) * ffn / tp
    return [(tokens, hidden * (1.0 + 2.0 * kvr) / tp, hidden),
            (tokens, hidden, hidden / tp),
            (tokens, up, hidden),
            (tokens, hidden, ffn / tp)]


def gemm_time_s(shapes, peak_flops, efficiency, hbm_bytes_per_s):
    """Sum over GEMMs of max(compute at the tile-quantised efficiency, memory roofline)."""
    t = 0.0
    for m, n, k in shapes:
        flops = 2.0 * m * n * k
        q = tile_quantisation(m) * tile_quantisation(n)
        t = t + np.maximum(flops / (peak_flops * efficiency * q),
                           BYTES * (m * k + k * n + m * n) / hbm_bytes_per_s)
    return t
