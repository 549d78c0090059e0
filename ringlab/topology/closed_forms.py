"""Closed-form bytes per link for each topology-aware algorithm, from the algorithm's definition, not its steps.

Each function returns int64 ``(len(cluster.links),)`` for a message of ``numel`` elements of ``itemsize``
bytes, exact for any numel (chunks follow :func:`ringlab.collectives.chunk_sizes`). They reason per
rank and per channel / tree / shard, not per transfer: tests hold them equal to what the router
counts from the schedule and from the simulator's moved bytes.

With N | numel and one channel per GPU (C = G) the ring formulas reduce to the textbook ones: each
GPU's NVLink port carries ``2 (N - 1) / N x M x (C - 1) / C`` per direction on K > 1 nodes, each NIC
``2 (N - 1) / N x M / C``; hierarchical puts ``2 (K - 1) / K x M / G`` on each NIC and ``2 (G - 1) / G x M``
on each NVLink port; NVLS puts ``M (1 + 1/G)`` on each NVLink port per direction; SHARP ``M / G`` on each NIC.

The collectives nccl-tests times besides these have closed forms for their line rate (``ringlab explain``'s
ceilings, :mod:`ringlab.nccl.ceiling`): all-to-all (``S/N`` to every peer, the cross-node share through the GPU's
own NIC), sendrecv (rank r to r + 1) and NCCL's ring broadcast / reduce (each channel's ring as a chain from or
to the root). Every path is the router's (:meth:`~ringlab.topology.cluster.Cluster.route`), charged by
:func:`charge`.
"""

from __future__ import annotations

import numpy as np

from ringlab.collectives import check_itemsize, chunk_sizes
from ringlab.collectives.tree import double_binary_tree_parents, tree_shape

from .cluster import Cluster
from .schedules import ring_orders, tree_chain_parents


def _hop(cluster: Cluster, out: np.ndarray, src, dst, nbytes) -> None:
    """Charge ``nbytes`` to every link of the path src -> dst (:meth:`Cluster.route`, the one home of paths)."""
    src, dst = (np.asarray(a, dtype=np.int64).ravel() for a in (src, dst))
    charge(out, cluster.route(src, dst)[0], nbytes)


def charge(out: np.ndarray, hops: np.ndarray, nbytes) -> None:
    """Add ``nbytes[i]`` to ``out`` at every link id of row i of ``hops`` (a route, padded with -1); exact int64."""
    nbytes = np.asarray(nbytes, dtype=np.int64).ravel()
    ids = hops.ravel() + 1  # the -1 padding lands in bin 0, dropped below
    weight = np.broadcast_to(nbytes[:, None], hops.shape).ravel()
    if int(nbytes.sum()) * hops.shape[1] < 2**53:  # float64 sums of whole bytes are exact: one fast pass
        out += np.rint(np.bincount(ids, weight, minlength=len(out) + 1)[1:]).astype(np.int64)
        return
    order = np.argsort(ids, kind="stable")  # beyond 2**53 bytes: sum per link in int64
    ids, weight = ids[order], weight[order]
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    sums = np.add.reduceat(weight, starts)
    keep = ids[starts] > 0
    out[ids[starts][keep] - 1] += sums[keep]


def _sizes(numel: int, chunks: int, itemsize: int) -> np.ndarray:
    return chunk_sizes(numel, chunks) * check_itemsize(itemsize)


def ring_channels_link_bytes(collective: str, cluster: Cluster, channels: int, numel: int, itemsize: int = 1,
                             mesh: bool | None = None) -> np.ndarray:
    """Per link, multi-channel ring: in channel c rank r sends its successor ``T_c - s(r, c)`` (reduce_scatter),
    ``T_c - s(succ, c)`` (all_gather) or both (all_reduce), with ``T_c`` the channel's bytes and ``s(r, c)``
    the size of chunk ``r * C + c``; each channel hop is one path."""
    k, g = cluster.nodes, cluster.gpus_per_node
    n = k * g
    mesh = cluster.ring_mesh if mesh is None else mesh
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
    """Per link, NVLS (+ tree across nodes): every GPU's NVLink port carries ``M + S_q`` each way, ``S_q`` its own
    slice (up: its slices for the others, its own slice read by the switch, its reduced slice once for the
    multicast; down: the reduced slice, the others' multicast, its own multicast back), so ``M (1 + 1/G)``;
    on rail q each node tree edge carries slice q's half t (``S_{q,t}``) up and down."""
    k, g = cluster.nodes, cluster.gpus_per_node
    half = _sizes(numel, 2 * g * pieces, itemsize).reshape(g, 2, pieces).sum(axis=2)  # (G, 2): slice q, half t
    m = int(half.sum())
    out = np.zeros(len(cluster.links), dtype=np.int64)
    if g > 1:  # M plus its own slice: the switch reads it and multicasts it back too
        node, gpu = np.repeat(np.arange(k), g), np.tile(np.arange(g), k)
        for d in ("tx", "rx"):
            np.add.at(out, cluster.link_id("nvlink", d, node, gpu), m + half[gpu].sum(axis=1))
    if k > 1:
        for t, parent in enumerate(double_binary_tree_parents(k)):
            children, _, _ = tree_shape(parent)
            edges = (parent >= 0).astype(np.int64) + children  # node-tree edges at each node
            for q in range(g):
                for d in ("tx", "rx"):
                    for cls, index in (("pcie", q), ("nic", int(cluster.port_of_gpu(q)))):
                        np.add.at(out, cluster.link_id(cls, d, np.arange(k), np.full(k, index)), edges * half[q, t])
    return out


# --- the other collectives, as nccl-tests times them (doc/PERFORMANCE.md); used for explain's ceilings ----------

def all_to_all_link_bytes(cluster: Cluster, message_bytes: int) -> np.ndarray:
    """Per link, all-to-all of ``message_bytes`` S per rank (nccl-tests alltoall: every rank sends S/N to each
    peer, int division). Every GPU sends ``(G - 1) S/N`` over its NVLink port (on a mesh S/N on each pair's link,
    over PCIe for a pair without one) and
    ``(N - G) S/N`` through its own PCIe and NIC port, received alike: the cross-node share is (N - G)/N of the
    data, and a GPU's NIC carries only that GPU's share (no ring spreads it over the node's rails; NCCL's PXN
    only changes which NIC, not how many bytes each carries)."""
    k, g = cluster.nodes, cluster.gpus_per_node
    n = k * g
    piece = int(message_bytes) // n
    out = np.zeros(len(cluster.links), dtype=np.int64)
    node, gpu = np.repeat(np.arange(k), g), np.tile(np.arange(g), k)
    if g > 1:
        if cluster.fabric == "mesh":
            a, b = np.meshgrid(np.arange(g), np.arange(g), indexing="ij")
            off = a != b
            if cluster.mesh_links is None:
                for i in range(k):
                    np.add.at(out, cluster.link_id(cluster.mesh_class, "tx", np.full(off.sum(), i), (a * g + b)[off]),
                              piece)
            else:  # a partial mesh is small (G <= 16): route every intra-node pair, PCIe where no link
                src = (np.arange(k)[:, None] * g + a[off][None, :]).ravel()
                dst = (np.arange(k)[:, None] * g + b[off][None, :]).ravel()
                _hop(cluster, out, src, dst, np.full(src.size, piece, dtype=np.int64))
        else:
            cls = "nvlink" if cluster.fabric == "nvswitch" else "pcie"
            for d in ("tx", "rx"):
                np.add.at(out, cluster.link_id(cls, d, node, gpu), (g - 1) * piece)
    if k > 1:
        for d in ("tx", "rx"):
            np.add.at(out, cluster.link_id("pcie", d, node, gpu), (n - g) * piece)
            np.add.at(out, cluster.link_id("nic", d, node, cluster.port_of_gpu(gpu)), (n - g) * piece)
    return out


def sendrecv_link_bytes(cluster: Cluster, message_bytes: int) -> np.ndarray:
    """Per link, nccl-tests sendrecv: rank r sends S to rank r + 1 (mod N) and receives S from r - 1."""
    n = cluster.world_size
    out = np.zeros(len(cluster.links), dtype=np.int64)
    if n > 1:
        _hop(cluster, out, np.arange(n), np.roll(np.arange(n), -1), np.full(n, int(message_bytes)))
    return out


def chain_link_bytes(collective: str, cluster: Cluster, channels: int, message_bytes: int, root: int = 0) -> np.ndarray:
    """Per link, NCCL's ring broadcast / reduce: channel c's ring (:func:`ring_orders`) as a pipelined chain from
    ``root`` (broadcast) or to it (reduce), each hop carrying the channel's share of S (S cut in C parts as
    chunks are); the ring's edge into the root (broadcast) or out of it (reduce) is not used."""
    if collective not in ("broadcast", "reduce"):
        raise ValueError(f"chains carry broadcast or reduce, not {collective!r}")
    k, g = cluster.nodes, cluster.gpus_per_node
    out = np.zeros(len(cluster.links), dtype=np.int64)
    if k * g == 1:
        return out
    orders = ring_orders(k, g, channels, cluster.ring_mesh)
    succ = np.roll(orders, -1, axis=1)
    share = np.broadcast_to(chunk_sizes(int(message_bytes), channels)[:, None], orders.shape)
    used = (succ != root) if collective == "broadcast" else (orders != root)
    _hop(cluster, out, orders[used], succ[used], share[used])
    return out
