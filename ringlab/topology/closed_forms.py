"""Closed-form bytes per link for each topology-aware algorithm, from the algorithm's definition, not its steps.

Each function returns int64 ``(len(cluster.links),)`` for a message of ``numel`` elements of ``itemsize``
bytes, exact for any numel (chunks follow :func:`ringlab.collectives.chunk_sizes`). They reason per
rank and per channel / tree / shard, not per transfer: tests hold them equal to what the router
counts from the schedule and from the simulator's moved bytes.

With N | numel and one channel per GPU (C = G) the ring formulas reduce to the textbook ones: each
GPU's NVLink port carries ``2 (N - 1) / N x M x (C - 1) / C`` per direction on K > 1 nodes, each NIC
``2 (N - 1) / N x M / C``; hierarchical puts ``2 (K - 1) / K x M / G`` on each NIC and ``2 (G - 1) / G x M``
on each NVLink port; NVLS puts ``M`` on each NVLink port per direction; SHARP ``M / G`` on each NIC.
"""

from __future__ import annotations

import numpy as np

from ringlab.collectives import check_itemsize, chunk_sizes
from ringlab.collectives.tree import double_binary_tree_parents, tree_shape

from .cluster import Cluster
from .schedules import ring_orders, tree_chain_parents


def _hop(cluster: Cluster, out: np.ndarray, src, dst, nbytes) -> None:
    """Charge ``nbytes`` to every link of the path src -> dst (per the model in :mod:`ringlab.topology.cluster`)."""
    g = cluster.gpus_per_node
    src, dst, nbytes = (np.asarray(a, dtype=np.int64).ravel() for a in (src, dst, nbytes))
    sn, sg, dn, dg = src // g, src % g, dst // g, dst % g
    same = sn == dn
    i = same
    if cluster.fabric == "nvswitch":
        np.add.at(out, cluster.link_id("nvlink", "tx", sn[i], sg[i]), nbytes[i])
        np.add.at(out, cluster.link_id("nvlink", "rx", dn[i], dg[i]), nbytes[i])
    elif cluster.fabric == "mesh":
        np.add.at(out, cluster.link_id("xgmi", "tx", sn[i], sg[i] * g + dg[i]), nbytes[i])
    else:
        np.add.at(out, cluster.link_id("pcie", "tx", sn[i], sg[i]), nbytes[i])
        np.add.at(out, cluster.link_id("pcie", "rx", dn[i], dg[i]), nbytes[i])
    i = ~same
    if i.any():
        np.add.at(out, cluster.link_id("pcie", "tx", sn[i], sg[i]), nbytes[i])
        np.add.at(out, cluster.link_id("nic", "tx", sn[i], cluster.port_of_gpu(sg[i])), nbytes[i])
        np.add.at(out, cluster.link_id("nic", "rx", dn[i], cluster.port_of_gpu(dg[i])), nbytes[i])
        np.add.at(out, cluster.link_id("pcie", "rx", dn[i], dg[i]), nbytes[i])


def _sizes(numel: int, chunks: int, itemsize: int) -> np.ndarray:
    return chunk_sizes(numel, chunks) * check_itemsize(itemsize)


def ring_channels_link_bytes(collective: str, cluster: Cluster, channels: int, numel: int, itemsize: int = 1,
                             mesh: bool | None = None) -> np.ndarray:
    """Per link, multi-channel ring: in channel c rank r sends its successor ``T_c - s(r, c)`` (reduce_scatter),
    ``T_c - s(succ, c)`` (all_gather) or both (all_reduce), with ``T_c`` the channel's bytes and ``s(r, c)``
    the size of chunk ``r * C + c``; each channel hop is one path."""
    k, g = cluster.nodes, cluster.gpus_per_node
    n = k * g
    mesh = cluster.fabric == "mesh" if mesh is None else mesh
    orders = ring_orders(k, g, channels, mesh)
    size = _sizes(numel, n * channels, itemsize).reshape(n, channels)
    total = size.sum(axis=0)  # (C,)
    succ = np.roll(orders, -1, axis=1)
    c = np.arange(channels)[:, None]
    own, nxt = size[orders, c], size[succ, c]
    sent = {"all_reduce": 2 * total[:, None] - own - nxt, "reduce_scatter": total[:, None] - own,
            "all_gather": total[:, None] - nxt}[collective]
    out = np.zeros(len(cluster.links), dtype=np.int64)
    if n > 1:
        _hop(cluster, out, orders, succ, sent)
    return out


def hierarchical_link_bytes(cluster: Cluster, numel: int, itemsize: int = 1, in_network: bool = False) -> np.ndarray:
    """Per link, hierarchical (and ``sharp``): in each node GPU g sends GPU g + 1 ``M - S_g`` (reduce-scatter)
    and ``M - S_{g+1}`` (all-gather), S_g its shard; on rail g node i sends node i + 1
    ``2 S_g - p[g, i+1] - p[g, i+2]`` (ring over the K pieces p of shard g), or with in-network reduction
    exactly ``S_g`` up and ``S_g`` down per GPU."""
    k, g = cluster.nodes, cluster.gpus_per_node
    piece = _sizes(numel, k * g, itemsize).reshape(g, k)  # piece[g, q] = chunk g*K + q
    shard, m = piece.sum(axis=1), int(piece.sum())
    out = np.zeros(len(cluster.links), dtype=np.int64)
    node, gpu = np.meshgrid(np.arange(k), np.arange(g), indexing="ij")
    if g > 1:
        _hop(cluster, out, node * g + gpu, node * g + (gpu + 1) % g, (m - shard[gpu]) + (m - shard[(gpu + 1) % g]))
    if k > 1 and not in_network:
        _hop(cluster, out, node * g + gpu, ((node + 1) % k) * g + gpu,
             2 * shard[gpu] - piece[gpu, (node + 1) % k] - piece[gpu, (node + 2) % k])
    elif k > 1:
        ports = cluster.port_of_gpu(gpu)
        for d in ("tx", "rx"):
            for cls, index in (("pcie", gpu), ("nic", ports)):
                np.add.at(out, cluster.link_id(cls, d, node, index), shard[gpu])
    return out


def tree_chains_link_bytes(cluster: Cluster, channels: int, numel: int, itemsize: int = 1,
                           pipeline_chunks: int = 4) -> np.ndarray:
    """Per link, trees with chains: tree u carries ``S_u`` (its k pieces) up every edge and down again, so each
    child -> parent path carries ``S_u`` each way."""
    k, g = cluster.nodes, cluster.gpus_per_node
    size = _sizes(numel, 2 * channels * pipeline_chunks, itemsize).reshape(2 * channels, pipeline_chunks).sum(axis=1)
    out = np.zeros(len(cluster.links), dtype=np.int64)
    for u, parent in enumerate(tree_chain_parents(k, g, channels)):
        child = np.flatnonzero(parent >= 0)
        nb = np.full(child.size, size[u])
        _hop(cluster, out, child, parent[child], nb)
        _hop(cluster, out, parent[child], child, nb)
    return out


def nvls_link_bytes(cluster: Cluster, numel: int, itemsize: int = 1, pieces: int = 4) -> np.ndarray:
    """Per link, NVLS (+ tree across nodes): every GPU's NVLink port carries ``M`` each way (its slices for the
    others up, one reduced copy of its own slice down; its own slice up once, the others' multicast down);
    on rail q each node tree edge carries slice q's half t (``S_{q,t}``) up and down."""
    k, g = cluster.nodes, cluster.gpus_per_node
    half = _sizes(numel, 2 * g * pieces, itemsize).reshape(g, 2, pieces).sum(axis=2)  # (G, 2): slice q, half t
    m = int(half.sum())
    out = np.zeros(len(cluster.links), dtype=np.int64)
    if g > 1:
        node, gpu = np.repeat(np.arange(k), g), np.tile(np.arange(g), k)
        for d in ("tx", "rx"):
            np.add.at(out, cluster.link_id("nvlink", d, node, gpu), m)
    if k > 1:
        for t, parent in enumerate(double_binary_tree_parents(k)):
            children, _, _ = tree_shape(parent)
            edges = (parent >= 0).astype(np.int64) + children  # node-tree edges at each node
            for q in range(g):
                for d in ("tx", "rx"):
                    for cls, index in (("pcie", q), ("nic", int(cluster.port_of_gpu(q)))):
                        np.add.at(out, cluster.link_id(cls, d, np.arange(k), np.full(k, index)), edges * half[q, t])
    return out
