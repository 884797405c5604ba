"""NCCL's NVLS tree (NVLink SHARP inside each node, a double binary tree of the nodes' heads across
nodes): latency, byte time, chunk rules and pipeline fill, vectorised over numpy arrays. Every
constant is in hwmodels/catalog/collectives.toml with its NCCL file and commit; the rules are
checked against an event simulation in tests/topologies/test_nvls_tree_pipeline.py."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


def _beta(size_bytes, bandwidth_bps):
    return np.asarray(size_bytes, dtype=float) * 8.0 / np.asarray(bandwidth_bps, dtype=float)


def nvls_tree_latency_s(nodes, lat_nvls_s, lat_net_s, base_s):
    """NVLS tree all-reduce (NVLink SHARP inside each node, a tree across nodes): base + one
    in-switch reduction step + 2 log2(nodes) network levels, whatever the ranks per node
    (NVIDIA/nccl:src/graph/tuning.cc, NVLS_TREE latency: intraLat + 2 log2(nNodes) interLat)."""
    nodes = np.maximum(np.asarray(nodes, dtype=float), 1.0)
    return base_s + lat_nvls_s + 2.0 * np.log2(nodes) * lat_net_s


class NvlsTree(NamedTuple):
    """NCCL's NVLS tree (hwmodels/catalog/collectives.toml ``nvls_tree_*``, ``nvls_chunk_bytes``,
    each cited there): its algorithm-bandwidth factor, the channels it runs on, its chunk rules,
    and ``heads``, the NVLS heads per node (one per NIC-attached GPU, at most one per GPU and
    32 per node: NVIDIA/nccl src/graph/search.cc, NVLS pattern), a broadcasting array."""
    bandwidth_factor: float
    channels: float
    chunk_bytes: float
    max_chunk_bytes: float
    heads: object


class NvlsGroup(NamedTuple):
    """The size-independent part of a group's NVLS tree (``nvls_tree_group``): computed once per
    group, used for every call size."""
    bandwidth_factor: float
    levels: object          # max(2 log2(nodes) - 3, 0): fill in waves of a one-loop call
    hc: object              # channels x heads
    wave: object            # channels x heads x chunk before the per-size rules (bytes)
    rules: tuple            # (times, capped wave) of the per-size chunk rules that can apply


# src/enqueue.cc calcCollChunking (NVIDIA/nccl tag v2.24.3-1), NCCL_ALGO_NVLS_TREE: the chunk
# becomes cap where one channel's bytes < times x heads x chunk and chunk > cap, in this order
_NVLS_TREE_CHUNK_RULES = ((32.0, 262144.0), (16.0, 131072.0), (4.0, 65536.0), (1.0, 32768.0))


def nvls_tree_group(nodes, spec):
    """``NvlsGroup`` of groups over ``nodes`` nodes with ``spec``'s channels and heads."""
    nodes = np.maximum(np.asarray(nodes, dtype=float), 1.0)
    hc = spec.channels * np.asarray(spec.heads, dtype=float)
    chunk = np.where(nodes >= 4, min(spec.chunk_bytes, spec.max_chunk_bytes), float(spec.chunk_bytes))
    top = float(np.max(chunk, initial=0.0))
    rules = tuple((times, hc * cap) for times, cap in _NVLS_TREE_CHUNK_RULES if cap < top)
    return NvlsGroup(float(spec.bandwidth_factor), np.maximum(2.0 * np.log2(nodes) - 3.0, 0.0), hc, hc * chunk, rules)


def _nvls_wave(size_bytes, group):
    """channels x heads x chunk after the per-size rules (a rule on one channel's bytes S /
    channels against times x heads x chunk is one on S against times x this wave)."""
    size = np.asarray(size_bytes, dtype=float)
    wave = group.wave
    for times, capped in group.rules:
        wave = np.where((size < times * wave) & (wave > capped), capped, wave)
    return wave


def nvls_tree_chunk_bytes(size_bytes, nodes, heads, channels, chunk_bytes, max_chunk_bytes):
    """The NVLS tree's chunk per head and channel, as NVIDIA/nccl src/enqueue.cc calcCollChunking
    (tag v2.24.3-1, NCCL_ALGO_NVLS_TREE) sets it for one channel's bytes b = S / channels (v2.24.3
    calls it per channel): chunk = nvlsChunkSize, at most ``max_chunk_bytes`` from 4 nodes
    (NCCL_NVLSTREE_MAX_CHUNKSIZE default), then 256 KiB if b < 32 heads chunk, 128 KiB if b < 16
    heads chunk, 64 KiB if b < 4 heads chunk and 32 KiB if b < heads chunk (each only if it
    shrinks the chunk)."""
    group = nvls_tree_group(nodes, NvlsTree(1.0, channels, chunk_bytes, max_chunk_bytes, heads))
    return _nvls_wave(size_bytes, group) / group.hc


def nvls_tree_fill_s(size_bytes, nodes, tree_bus_bps, spec):
    """Pipeline fill of NCCL's NVLS tree beyond latency + S / its bandwidth: max(2 log2(nodes) -
    3, 0) x min(S, wave) / tree bus, wave = channels x heads x chunk
    (``nvls_tree_chunk_bytes``), the bytes all channels move per loop (NVIDIA/nccl
    src/device/all_reduce.h, NVLS_TREE: each head carries one chunk per channel and loop up the
    inter-node tree and back down; src/graph/connect.cc connectNvls: a double binary tree of the
    nodes' heads, src/graph/trees.cc ncclGetDtree; every channel's chunk of a head shares that
    head's NIC). A call of one loop or less (S <= wave, up to 8 MiB on 8 heads from 4 nodes)
    is one chunk per channel and head, forwarded level by level: the deepest leaf's chunk
    crosses 2 log2(nodes) network levels, each at the loaded NICs' rate, where a pipelined
    tree moves the bytes in the time of two. Larger calls fill once per call. Coefficient from
    an event simulation of that tree (tests/topologies/test_nvls_tree_pipeline.py: per-connection
    FIFO messages on NICs shared by all channels): its single-loop fill at 4, 8, 16, 32 nodes is
    1, 3, 5, 7 waves, 2 log2(nodes) - 3; zero at one or two nodes (two nodes: NCCL's tree crosses
    the network once). The heads' NICs are taken at the tree bus, as the NVLS tree's byte time
    takes them (``nvls_tree_beta_s``). ``spec``: ``NvlsTree``, or the group's ``NvlsGroup`` (then
    ``nodes`` is not used)."""
    group = spec if isinstance(spec, NvlsGroup) else nvls_tree_group(nodes, spec)
    return group.levels * _beta(np.minimum(np.asarray(size_bytes, dtype=float), _nvls_wave(size_bytes, group)),
                                tree_bus_bps)


def nvls_tree_beta_s(size_bytes, tree_bus_bps, spec):
    """The NVLS tree's byte time (``spec``: NvlsTree or NvlsGroup): S / (5/6 x tree bus / 2)
    (NVIDIA/nccl src/graph/tuning.cc, NVLS_TREE: algorithm bandwidth 5/6 x nChannels x
    min(bwIntra, bwInter / 2 above two nodes, bwInter on two); the model's tree bus is twice the
    NIC share on two nodes, ``Fabric._bus``), without the plain tree's size correction, which
    tuning.cc applies to NCCL_ALGO_TREE only."""
    return 2.0 * _beta(size_bytes, spec.bandwidth_factor * np.asarray(tree_bus_bps, dtype=float))
