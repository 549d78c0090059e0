"""A cluster: nodes of GPUs joined by an NVLink domain (or an xGMI mesh, or PCIe), NICs on rails between them.

Model (pure numpy, no data):

* ``nodes`` nodes of ``gpus_per_node`` GPUs; a node is one NVLink domain (8 GPUs on HGX/DGX, 72 on
  GB200 NVL72, where the "node" is the rack). Rank r sits on node ``r // gpus_per_node``, GPU
  ``r % gpus_per_node`` (block placement, as torchrun numbers ranks); :meth:`Cluster.locate`.
* Inside a node, ``fabric`` says how GPUs reach each other:

  - ``"nvswitch"``: every GPU has one port into a non-blocking switch, ``gpu_bandwidth`` bytes/s per
    direction (NVLink 4: 450 GB/s). A transfer a -> b uses a's ``nvlink`` uplink and b's downlink.
    ``nvls=True``: the switch can reduce and multicast (NVLink SHARP).
  - ``"mesh"``: point-to-point links of ``gpu_bandwidth`` each per direction: by default one between
    every pair (AMD xGMI, class ``xgmi``); or ``mesh_links[a][b]`` of them, bonded, between a and b (a
    DGX-1's NVLink hybrid cube-mesh, ``mesh_class="nvlink"``). a -> b uses the pair's one link a->b, of
    ``mesh_links[a][b] * gpu_bandwidth``; a pair without a link goes over PCIe (a's ``pcie`` uplink, b's
    downlink): NCCL's P2P-over-PCIe or SHM transport (through host memory, across the CPU sockets on a
    DGX-1, whose limits are left out like the others below).
  - ``"pcie"``: GPUs meet in a PCIe switch; a -> b uses a's ``pcie`` uplink and b's downlink.

* Between nodes: ``nics_per_node`` NICs of ``nic_gbps`` Gb/s each (as sold; bytes/s is ``/ 8``).
  Traffic leaves a GPU over its own ``pcie`` uplink (GPUDirect RDMA) to its NIC, crosses the fabric
  and arrives through the receiver's NIC and PCIe downlink: four links. Rail-optimised wiring puts
  GPU i's NIC on rail i of every node; the scale-out fabric is taken as non-blocking (a full fat
  tree), so which rail a transfer lands on changes no bandwidth, only the NIC that carries it. With
  fewer NICs than GPUs, GPUs share them evenly (GPU g uses NIC ``g * nics // gpus``); with more, each
  GPU's ``nics / gpus`` NICs form one striped *port* (aws-ofi-nccl stripes a GPU's traffic over its
  EFA devices), counted as one ``nic`` link of their summed rate. ``sharp=True``: the network
  switches can reduce (in-network reduction, SHARP).

Links are numbered once (:class:`LinkTable`); every link has a class (``nvlink``, ``xgmi``, ``pcie``,
``nic``; on a mesh the pair links are of ``mesh_class``), a direction (``tx`` leaves the GPU or node, ``rx`` enters it) and a bandwidth. Latency is per
path: ``gpu_latency`` for a transfer inside a node, ``nic_latency`` for one between nodes (the whole
GPU -> NIC -> fabric -> NIC -> GPU path, as NCCL's tuner charges a network step).
Routing (:meth:`Cluster.route`) maps arrays of (src, dst) ranks to the links each transfer crosses.
Left out: switch-internal congestion, PCIe root-complex and CPU-socket limits, adaptive routing and
the spine of the scale-out fabric (taken as non-blocking).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

FABRICS = ("nvswitch", "mesh", "pcie")
LINK_CLASSES = ("nvlink", "xgmi", "pcie", "nic")
# Hop positions in a route: intra-node routes use the first two, inter-node routes all four.
MAX_HOPS = 4
MAX_RANKS = 1 << 24  # GPUs of a cluster: 16.8 M, forty times the largest built (2025)
MAX_NICS_PER_NODE = 4096  # aws-p5 has 32 EFA devices per node
MAX_LINKS = 1 << 24  # links in one table (~60 B each): a 4,096-GPU mesh node has 16.8 M; larger is refused


def _finite(value) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False


def _positive(value, name: str, integer: bool = False, allow_zero: bool = False):
    ok_type = isinstance(value, (int, np.integer)) if integer else isinstance(value, (int, float, np.number))
    if isinstance(value, bool) or not ok_type or not (value >= 0 if allow_zero else value > 0) \
            or not (integer or _finite(value)):
        kind = "an int" if integer else "a finite number"
        raise ValueError(f"{name} must be {kind} {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return int(value) if integer else float(value)


@dataclass(frozen=True)
class LinkTable:
    """Every link of a cluster, as parallel arrays indexed by link id.

    ``cls`` (str, one of :data:`LINK_CLASSES`), ``direction`` ("tx"/"rx"), ``node`` and ``index`` (GPU, NIC
    port, or for a mesh's pair links ``src_gpu * G + dst_gpu``), ``bandwidth`` (bytes/s); ``pair_class``: the
    class of the mesh's pair links (None off a mesh).
    """

    cls: np.ndarray
    direction: np.ndarray
    node: np.ndarray
    index: np.ndarray
    bandwidth: np.ndarray
    gpus_per_node: int
    pair_class: str | None = None

    def __len__(self) -> int:
        return len(self.cls)

    def label(self, link: int) -> str:
        """``"node 1 nic 3 tx"``, ``"node 0 gpu 2 nvlink rx"``, ``"node 0 xgmi gpu 2->gpu 5"``."""
        c, d, n, i = self.cls[link], self.direction[link], int(self.node[link]), int(self.index[link])
        if c == "nic":
            return f"node {n} nic {i} {d}"
        if c == self.pair_class:
            a, b = divmod(i, self.gpus_per_node)
            return f"node {n} {c} gpu {a}->gpu {b}"
        return f"node {n} gpu {i} {c} {d}"

    def of_class(self, cls: str, direction: str | None = None) -> np.ndarray:
        """Link ids of one class (and direction), in id order."""
        mask = self.cls == cls
        if direction is not None:
            mask &= self.direction == direction
        return np.flatnonzero(mask)


@dataclass(frozen=True)
class Cluster:
    """A cluster of ``nodes`` x ``gpus_per_node`` GPUs (see the module docstring for the model).

    Args:
        name: preset name or ``"custom"``.
        nodes, gpus_per_node: ints >= 1.
        fabric: ``nvswitch | mesh | pcie`` (inside a node).
        gpu_bandwidth: bytes/s per direction of a GPU's NVSwitch port, of one mesh link, or of its PCIe link.
        mesh_links: (mesh only) G x G link counts (tuple of tuples), symmetric, zero diagonal; None: one link
            between every pair.
        mesh_class: (mesh only) the class of the pair links, ``"xgmi"`` or ``"nvlink"``.
        gpu_latency: seconds per intra-node transfer step.
        nics_per_node: NICs per node (0 only for one node); nic_gbps: Gb/s per NIC as sold;
        nic_latency: seconds per inter-node transfer step.
        pcie_bandwidth: the GPU's PCIe path to its NIC, bytes/s per direction.
        rail_optimized: GPU i's NIC on rail i (recorded for pictures; the fabric is non-blocking either way).
        nvls, sharp: reduction in the NVLink switch / in the network switches.
        source: where the numbers come from.

    Raises ValueError for values outside those ranges.
    """

    name: str
    nodes: int
    gpus_per_node: int
    fabric: str
    gpu_bandwidth: float
    gpu_latency: float
    nics_per_node: int
    nic_gbps: float
    nic_latency: float
    pcie_bandwidth: float
    rail_optimized: bool = True
    nvls: bool = False
    sharp: bool = False
    source: str = ""
    notes: tuple[str, ...] = field(default=(), compare=False)
    mesh_links: tuple[tuple[int, ...], ...] | None = None
    mesh_class: str = "xgmi"

    def __post_init__(self) -> None:
        _positive(self.nodes, "nodes", integer=True)
        _positive(self.gpus_per_node, "gpus_per_node", integer=True)
        if self.nodes * self.gpus_per_node > MAX_RANKS:
            raise ValueError(f"nodes x gpus_per_node = {self.nodes:,} x {self.gpus_per_node:,} is above {MAX_RANKS:,} "
                             "ranks: no cluster comes near")
        if self.fabric not in FABRICS:
            raise ValueError(f"fabric must be one of {', '.join(FABRICS)}, got {self.fabric!r}")
        for name in ("gpu_bandwidth", "pcie_bandwidth"):
            _positive(getattr(self, name), name)
        for name in ("gpu_latency", "nic_latency"):
            _positive(getattr(self, name), name, allow_zero=True)
        if _positive(self.nics_per_node, "nics_per_node", integer=True, allow_zero=True) > MAX_NICS_PER_NODE:
            raise ValueError(f"nics_per_node={self.nics_per_node:,} is above {MAX_NICS_PER_NODE:,}: no node has that many")
        if self.nodes > 1:
            if self.nics_per_node == 0:
                raise ValueError(f"{self.nodes} nodes need nics_per_node >= 1")
            _positive(self.nic_gbps, "nic_gbps")
        else:
            _positive(self.nic_gbps, "nic_gbps", allow_zero=True)
        g, nics = self.gpus_per_node, self.nics_per_node
        if nics > g and nics % g:
            raise ValueError(f"nics_per_node={nics} above gpus_per_node={g} must be a multiple of it "
                             "(each GPU's NICs form one striped port)")
        if self.nvls and self.fabric != "nvswitch":
            raise ValueError("nvls (in-switch reduction) needs fabric='nvswitch'")
        self._check_mesh()

    def _check_mesh(self) -> None:
        if self.mesh_class not in ("xgmi", "nvlink"):
            raise ValueError(f"mesh_class must be 'xgmi' or 'nvlink', got {self.mesh_class!r}")
        if self.mesh_links is None:
            return
        if self.fabric != "mesh":
            raise ValueError("mesh_links (per-pair link counts) needs fabric='mesh'")
        g = self.gpus_per_node
        try:
            m = np.array(self.mesh_links)
        except ValueError:
            m = None
        if m is None or m.shape != (g, g) or m.dtype.kind not in "iu" or (m < 0).any() or (m != m.T).any() \
                or np.diagonal(m).any() or not all(isinstance(r, tuple) for r in (self.mesh_links, *self.mesh_links)):
            raise ValueError(f"mesh_links must be a {g} x {g} tuple of tuples of int link counts >= 0, symmetric, "
                             f"zero on the diagonal, got {self.mesh_links!r}")

    # --- shape -----------------------------------------------------------------------------------

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def nic_bandwidth(self) -> float:
        """Bytes/s per NIC and direction: ``nic_gbps * 1e9 / 8`` (NICs are sold in bits)."""
        return self.nic_gbps * 1e9 / 8

    @property
    def ports_per_node(self) -> int:
        """NIC ports the routing sees: the NICs, or one striped port per GPU when there are more NICs than GPUs."""
        return min(self.nics_per_node, self.gpus_per_node) if self.nics_per_node else 0

    @property
    def port_bandwidth(self) -> float:
        """Bytes/s per direction of one port (a NIC, or a GPU's striped NICs)."""
        per_port = max(1, self.nics_per_node // self.gpus_per_node) if self.nics_per_node > self.gpus_per_node else 1
        return per_port * self.nic_bandwidth

    @property
    def node_network_bandwidth(self) -> float:
        """Bytes/s per direction between one node and the fabric: all its NICs together."""
        return self.nics_per_node * self.nic_bandwidth

    @property
    def link_counts(self) -> np.ndarray:
        """int64 ``(G, G)``: links between each pair of GPUs of a mesh node (one per pair without ``mesh_links``,
        0 on the diagonal). ValueError off a mesh."""
        if self.fabric != "mesh":
            raise ValueError(f"{self.name} is not a mesh: its GPUs meet in a {self.fabric}")
        g = self.gpus_per_node
        return (np.array(self.mesh_links, dtype=np.int64) if self.mesh_links is not None
                else 1 - np.eye(g, dtype=np.int64))

    @property
    def ring_mesh(self):
        """What :func:`~ringlab.topology.schedules.ring_orders` takes as ``mesh`` for this cluster: False (a switch
        or PCIe), True (a full mesh) or the partial mesh's link counts."""
        return False if self.fabric != "mesh" else (self.mesh_links if self.mesh_links is not None else True)

    def with_nodes(self, nodes: int) -> Cluster:
        """The same cluster with another node count."""
        return replace(self, nodes=nodes)

    def locate(self, ranks) -> tuple[np.ndarray, np.ndarray]:
        """``(node, gpu)`` of each rank (int64 arrays), block placement. Raises ValueError out of range."""
        r = np.asarray(ranks, dtype=np.int64)
        if r.size and (r.min() < 0 or r.max() >= self.world_size):
            raise ValueError(f"rank out of range 0..{self.world_size - 1}")
        return r // self.gpus_per_node, r % self.gpus_per_node

    def port_of_gpu(self, gpu) -> np.ndarray:
        """The NIC port a GPU's inter-node traffic uses (its rail): ``g * ports // gpus``."""
        return np.asarray(gpu, dtype=np.int64) * self.ports_per_node // self.gpus_per_node

    # --- links -----------------------------------------------------------------------------------

    @cached_property
    def _layout(self) -> dict[str, int]:
        """First link id of each block: intra-node links, then PCIe, then NIC ports."""
        k, g = self.nodes, self.gpus_per_node
        intra = {"nvswitch": 2 * k * g, "mesh": k * g * g, "pcie": 0}[self.fabric]
        pcie = 2 * k * g
        return {"intra": 0, "pcie": intra, "nic": intra + pcie, "end": intra + pcie + 2 * k * self.ports_per_node}

    @property
    def link_count(self) -> int:
        """Links of the cluster (closed form: no table is built): intra-node links + 2 PCIe per GPU + 2 per port."""
        return self._layout["end"]

    @cached_property
    def links(self) -> LinkTable:
        """The :class:`LinkTable` of every link (cached). Raises ValueError above :data:`MAX_LINKS` links."""
        if self.link_count > MAX_LINKS:
            raise ValueError(f"{self.name}: {self.nodes:,} nodes x {self.gpus_per_node:,} GPUs ({self.fabric}) have "
                             f"{self.link_count:,} links, over the limit of {MAX_LINKS:,}; use fewer nodes or "
                             "GPUs per node")
        k, g, ports = self.nodes, self.gpus_per_node, self.ports_per_node
        parts = []
        node = np.repeat(np.arange(k), g)
        gpu = np.tile(np.arange(g), k)
        if self.fabric == "nvswitch":
            for d in ("tx", "rx"):
                parts.append(("nvlink", d, node, gpu, self.gpu_bandwidth))
        elif self.fabric == "mesh":  # a pair's links bonded as one; pairs without a link keep an entry no route uses
            bonded = (self.gpu_bandwidth if self.mesh_links is None
                      else np.tile(np.maximum(self.link_counts, 1).ravel(), k) * self.gpu_bandwidth)
            parts.append((self.mesh_class, "tx", np.repeat(np.arange(k), g * g), np.tile(np.arange(g * g), k),
                          bonded))
        pcie_bw = self.gpu_bandwidth if self.fabric == "pcie" else self.pcie_bandwidth
        for d in ("tx", "rx"):
            parts.append(("pcie", d, node, gpu, pcie_bw))
        for d in ("tx", "rx"):
            parts.append(("nic", d, np.repeat(np.arange(k), ports), np.tile(np.arange(ports), k),
                          self.port_bandwidth if ports else 1.0))
        cols = {name: [] for name in ("cls", "direction", "node", "index", "bandwidth")}
        for cls, d, nd, ix, bw in parts:
            cols["cls"].append(np.full(len(nd), cls))
            cols["direction"].append(np.full(len(nd), d))
            cols["node"].append(nd)
            cols["index"].append(ix)
            cols["bandwidth"].append(np.broadcast_to(np.asarray(bw, dtype=float), (len(nd),)))
        arrays = {name: np.concatenate(v) for name, v in cols.items()}
        table = LinkTable(gpus_per_node=g, pair_class=self.mesh_class if self.fabric == "mesh" else None, **arrays)
        assert len(table) == self._layout["end"]
        return table

    def link_id(self, cls: str, direction: str, node, index) -> np.ndarray:
        """Link ids (int64) of class ``cls`` and ``direction`` at ``node``: ``index`` is the GPU (nvlink,
        pcie), the NIC port (nic) or ``src_gpu * G + dst_gpu`` (a mesh's pair links, class ``mesh_class``,
        direction "tx"). ValueError for a class this cluster lacks."""
        k, g, lay = self.nodes, self.gpus_per_node, self._layout
        node, index = np.asarray(node, dtype=np.int64), np.asarray(index, dtype=np.int64)
        rx = direction == "rx"
        if cls == "nvlink" and self.fabric == "nvswitch":
            return lay["intra"] + rx * k * g + node * g + index
        if cls == self.mesh_class and self.fabric == "mesh" and not rx:
            return lay["intra"] + node * g * g + index
        if cls == "pcie":
            return lay["pcie"] + rx * k * g + node * g + index
        if cls == "nic" and self.ports_per_node:
            p = self.ports_per_node
            return lay["nic"] + rx * k * p + node * p + index
        raise ValueError(f"{self.name} has no {cls} {direction} links")

    def route(self, src, dst) -> tuple[np.ndarray, np.ndarray]:
        """The links each transfer ``src[i] -> dst[i]`` crosses.

        The one home of the path model (module docstring); link ids come from :meth:`link_id`.
        Returns ``(hops, switch_at)``: ``hops`` int64 ``(k, MAX_HOPS)`` link ids padded with -1, in path
        order; ``switch_at`` int64 ``(k,)``, the number of hops before the switch that could reduce or
        multicast (NVSwitch for intra-node nvswitch routes, the network for inter-node ones; -1 where
        no such switch is on the path). Raises ValueError for ranks out of range or ``src == dst``.
        """
        src, dst = np.asarray(src, dtype=np.int64).reshape(-1), np.asarray(dst, dtype=np.int64).reshape(-1)
        if (src == dst).any():
            raise ValueError("a transfer from a rank to itself crosses no link")
        (sn, sg), (dn, dg) = self.locate(src), self.locate(dst)
        hops = np.full((len(src), MAX_HOPS), -1, dtype=np.int64)
        switch_at = np.full(len(src), -1, dtype=np.int64)
        i = sn == dn  # inside a node: the fabric's own links
        if self.fabric == "nvswitch":
            hops[i, 0], hops[i, 1] = self.link_id("nvlink", "tx", sn[i], sg[i]), self.link_id("nvlink", "rx", dn[i], dg[i])
            switch_at[i] = 1
        else:
            if self.fabric == "mesh":  # pairs with a link use it; the others go over PCIe as on a PCIe node
                linked = i.copy()
                if self.mesh_links is not None:
                    linked[i] = self.link_counts[sg[i], dg[i]] > 0
                hops[linked, 0] = self.link_id(self.mesh_class, "tx", sn[linked],
                                               sg[linked] * self.gpus_per_node + dg[linked])
                i = i & ~linked
            hops[i, 0], hops[i, 1] = self.link_id("pcie", "tx", sn[i], sg[i]), self.link_id("pcie", "rx", dn[i], dg[i])
        i = sn != dn
        # between nodes: PCIe up, the GPU's NIC port out, the receiver's port in, PCIe down
        if i.any():
            hops[i] = np.stack([self.link_id("pcie", "tx", sn[i], sg[i]),
                                self.link_id("nic", "tx", sn[i], self.port_of_gpu(sg[i])),
                                self.link_id("nic", "rx", dn[i], self.port_of_gpu(dg[i])),
                                self.link_id("pcie", "rx", dn[i], dg[i])], 1)
            switch_at[i] = 2
        return hops, switch_at

    def describe(self) -> str:
        """One paragraph: shape, bandwidths (NICs in Gb/s and GB/s), options, source."""
        g = self.gpus_per_node
        if self.fabric == "mesh":
            per_gpu = g - 1 if self.mesh_links is None else int(self.link_counts[0].sum())
            kind = ("full mesh" if self.mesh_links is None
                    else f"{ {'nvlink': 'NVLink', 'xgmi': 'xGMI'}[self.mesh_class]} mesh of {per_gpu} links per GPU")
            intra = (f"{kind}, {self.gpu_bandwidth / 1e9:g} GB/s per link per direction "
                     f"({per_gpu * self.gpu_bandwidth / 1e9:g} GB/s per GPU)"
                     + ("; pairs without a link over PCIe" if self.mesh_links is not None
                        and (self.link_counts + np.eye(g, dtype=np.int64) == 0).any() else ""))
        else:
            intra = {"nvswitch": f"NVSwitch, {self.gpu_bandwidth / 1e9:g} GB/s per GPU per direction",
                     "pcie": f"PCIe, {self.gpu_bandwidth / 1e9:g} GB/s per GPU per direction"}[self.fabric]
        net = (f"{self.nics_per_node} x {self.nic_gbps:g} Gb/s NICs = {self.nics_per_node} x "
               f"{self.nic_bandwidth / 1e9:g} GB/s = {self.node_network_bandwidth / 1e9:g} GB/s per node per direction"
               if self.nics_per_node else "no NICs")
        extras = [x for x, on in (("NVLS", self.nvls), ("SHARP", self.sharp),
                                  ("rail-optimised", self.rail_optimized and self.nics_per_node)) if on]
        return (f"{self.name}: {self.nodes} node(s) x {g} GPUs; {intra}; {net}"
                + (f"; {', '.join(extras)}" if extras else "") + (f". Source: {self.source}" if self.source else ""))
