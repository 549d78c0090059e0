"""Cluster presets, each with its source, and custom clusters.

Bandwidths are per direction. Link rates already in :data:`ringlab.collectives.cost.LINKS` (NVLink 4 / 5,
PCIe 5.0 x16, their per-step latencies) are taken from there; NVLink 3 is the A100 datasheet's 600 GB/s both ways (the
``interconnect_bandwidth`` of :mod:`ringlab.calc.hardware`'s A100 presets, which sit a layer above and are checked
against it in the tests); NICs are given in Gb/s as sold.

========================  ======================================================================================
preset                    source
========================  ======================================================================================
``dgx-h100``              NVIDIA DGX H100 datasheet / user guide: 8 x H100 SXM, 4 NVSwitch (NVLink 4, 900 GB/s
                          per GPU both ways), 8 x ConnectX-7 400 Gb/s for the compute fabric, one per GPU;
                          DGX SuperPOD H100 reference architecture: rail-optimised NDR fabric (Quantum-2,
                          SHARPv3). NVSwitch gen 3 does NVLink SHARP (NVLS).
``dgx-a100``              NVIDIA DGX A100 datasheet / user guide: 8 x A100 SXM4 80GB, 6 NVSwitch (NVLink 3, 600 GB/s
                          per GPU both ways), 8 single-port ConnectX-6 VPI 200 Gb/s HDR InfiniBand for the compute
                          fabric, one per GPU (the dual-port ones are for storage; NVIDIA/nccl#812: "DGX A100 with
                          8x 200 Gb/s"), PCIe Gen4 between GPU and NIC; DGX SuperPOD A100 reference architecture:
                          rail-optimised HDR fabric. NVSwitch gen 2 has no NVLS.
``hgx-h200``              NVIDIA H200 datasheet: NVLink 900 GB/s; HGX H200 reference configurations pair each
                          GPU with one 400 Gb/s ConnectX-7 / BlueField-3 SuperNIC, rail-optimised.
``dgx-b200``              NVIDIA DGX B200 datasheet: 8 x B200, NVLink 5 (1.8 TB/s per GPU both ways), 8 x
                          single-port ConnectX-7 400 Gb/s; NVSwitch gen 4 with NVLS.
``gb200-nvl72``           NVIDIA GB200 NVL72 datasheet: 72 Blackwell GPUs in one NVLink domain, 1.8 TB/s per
                          GPU; DGX GB200 user guide: each compute tray's 4 GPUs have 4 x ConnectX-7 400 Gb/s,
                          so 72 NICs per rack. The "node" here is the rack.
``gb300-nvl72``           NVIDIA GB300 NVL72 datasheet / product page: 72 Blackwell Ultra GPUs in one NVLink 5
                          domain, 1.8 TB/s per GPU both ways (130 TB/s per rack); one ConnectX-8 SuperNIC at
                          800 Gb/s per GPU for the compute fabric (Quantum-X800 InfiniBand or Spectrum-X
                          Ethernet). NVLink domain vs fabric per GPU: 1.8 TB/s both ways against 100 GB/s one
                          way is the quoted ~18x ("roughly twenty"); per direction, 900 against 100, 9x.
``dgx1-v100``             NVIDIA DGX-1 with Tesla V100 system architecture whitepaper (WP-08437-002): 8 x V100
                          SXM2, 6 NVLink 2 links per GPU at 25 GB/s per direction (150 GB/s per GPU each way) in
                          a hybrid cube-mesh: two quads of 4 fully connected GPUs, joined GPU i - GPU i + 4; pairs
                          0-3, 0-4, 1-2, 1-5, 2-3, 4-7, 5-6, 6-7 doubly linked (NCCL's topology dump of a DGX-1 V100,
                          NVIDIA/nccl#671: GPU 0 has 1 link to GPUs 1 and 2, 2 to GPUs 3 and 4; ``nvidia-smi topo
                          -m`` NV1 / NV2). The other 12 pairs have no NVLink: traffic between them crosses each
                          GPU's PCIe link (Gen3 x16, 16 GB/s per direction; NCCL's SHM transport through the host),
                          so NCCL's rings use NVLink pairs only (6 rings, one per link, 150 GB/s). 4 x 100 Gb/s
                          EDR InfiniBand, one per GPU pair.
``mi300x-platform``       AMD Instinct MI300X platform datasheet: 8 MI300X in a full xGMI mesh, 7 links per GPU,
                          128 GB/s per link both ways (64 GB/s each way), 896 GB/s aggregate; AMD's reference
                          scale-out: one 400 Gb/s NIC per GPU.
``pcie-8gpu``             8 x NVIDIA L40S (datasheet: PCIe Gen4 x16, 64 GB/s both ways, no NVLink) in a
                          server of NVIDIA's "2-8-5-200" enterprise reference configuration (2 CPUs, 8 GPUs,
                          200 Gb/s of east-west network per GPU: 4 x 400 Gb/s NICs, one per GPU pair).
``aws-p5``                AWS EC2 P5 (p5.48xlarge) page: 8 x H100 SXM with NVSwitch, 3200 Gbps of EFA as
                          32 x 100 Gb/s devices (4 per GPU; aws-ofi-nccl stripes a GPU's traffic over its 4).
========================  ======================================================================================

Latencies are assumptions of the order NCCL's tuner uses (``src/graph/tuning.cc``): ~2 us per NVLink step,
~5 us per network step, as in :data:`ringlab.collectives.cost.LINKS`.
"""

from __future__ import annotations

import difflib
from dataclasses import replace

from ringlab.collectives.cost import LINKS

from .cluster import Cluster

_NVLINK4, _NVLINK5, _PCIE5, _NET = LINKS["nvlink4"], LINKS["nvlink5"], LINKS["pcie5-x16"], LINKS["ib-ndr"]
NVLINK3_BANDWIDTH = 300e9  # A100 SXM4 datasheet: NVLink 3, 600 GB/s bidirectional = 300 GB/s per direction
_PCIE4_BW = 32e9  # PCIe 4.0 x16: 16 GT/s x 16 lanes, ~32 GB/s per direction (L40S datasheet: 64 GB/s both ways)
_PCIE3_BW = 16e9  # PCIe 3.0 x16: 8 GT/s x 16 lanes, ~16 GB/s per direction (V100 SXM2's host link)
NVLINK2_LINK_BANDWIDTH = 25e9  # V100 datasheet: 6 NVLink 2 links, 300 GB/s both ways = 25 GB/s per link per direction
# DGX-1 V100 hybrid cube-mesh: NVLink 2 links between GPU a and GPU b (docstring table for the sources)
DGX1_V100_NVLINKS = ((0, 1, 1, 2, 2, 0, 0, 0),
                     (1, 0, 2, 1, 0, 2, 0, 0),
                     (1, 2, 0, 2, 0, 0, 1, 0),
                     (2, 1, 2, 0, 0, 0, 0, 1),
                     (2, 0, 0, 0, 0, 1, 1, 2),
                     (0, 2, 0, 0, 1, 0, 2, 1),
                     (0, 0, 1, 0, 1, 2, 0, 2),
                     (0, 0, 0, 1, 2, 1, 2, 0))


def _preset(name: str, gpus: int, fabric: str, gpu_bw: float, gpu_lat: float, nics: int, gbps: float,
            source: str, nvls: bool = False, sharp: bool = False, pcie_bw: float = _PCIE5.bandwidth,
            **mesh) -> Cluster:
    return Cluster(name, 1, gpus, fabric, gpu_bw, gpu_lat, nics, gbps, _NET.alpha, pcie_bw,
                   rail_optimized=True, nvls=nvls, sharp=sharp, source=source, **mesh)


PRESETS: dict[str, Cluster] = {c.name: c for c in (
    _preset("dgx-h100", 8, "nvswitch", _NVLINK4.bandwidth, _NVLINK4.alpha, 8, 400,
            "NVIDIA DGX H100 datasheet (8x H100 SXM, NVLink 4 900 GB/s, 8x ConnectX-7 400 Gb/s); "
            "DGX SuperPOD H100 reference architecture (rail-optimised NDR, SHARPv3)", nvls=True, sharp=True),
    _preset("dgx-a100", 8, "nvswitch", NVLINK3_BANDWIDTH, _NVLINK4.alpha, 8, 200,
            "NVIDIA DGX A100 datasheet / user guide (8x A100 SXM4 80GB, NVLink 3 600 GB/s, 8x ConnectX-6 HDR "
            "200 Gb/s for compute); DGX SuperPOD A100 reference architecture (rail-optimised HDR)", pcie_bw=_PCIE4_BW),
    _preset("hgx-h200", 8, "nvswitch", _NVLINK4.bandwidth, _NVLINK4.alpha, 8, 400,
            "NVIDIA H200 datasheet (NVLink 900 GB/s); HGX H200 reference configuration: one 400 Gb/s "
            "ConnectX-7 / BlueField-3 per GPU, rail-optimised", nvls=True),
    _preset("dgx-b200", 8, "nvswitch", _NVLINK5.bandwidth, _NVLINK5.alpha, 8, 400,
            "NVIDIA DGX B200 datasheet (8x B200, NVLink 5 1.8 TB/s, 8x ConnectX-7 400 Gb/s)", nvls=True, sharp=True),
    _preset("gb200-nvl72", 72, "nvswitch", _NVLINK5.bandwidth, _NVLINK5.alpha, 72, 400,
            "NVIDIA GB200 NVL72 datasheet (72 GPUs, one NVLink domain, 1.8 TB/s per GPU); DGX GB200 user guide "
            "(4x ConnectX-7 400 Gb/s per 4-GPU compute tray)", nvls=True, sharp=True),
    _preset("gb300-nvl72", 72, "nvswitch", _NVLINK5.bandwidth, _NVLINK5.alpha, 72, 800,
            "NVIDIA GB300 NVL72 datasheet (72 Blackwell Ultra GPUs, one NVLink 5 domain, 1.8 TB/s per GPU); "
            "one ConnectX-8 SuperNIC 800 Gb/s per GPU", nvls=True, sharp=True),
    _preset("dgx1-v100", 8, "mesh", NVLINK2_LINK_BANDWIDTH, _NVLINK4.alpha, 4, 100,
            "NVIDIA DGX-1 with Tesla V100 system architecture whitepaper (8x V100 SXM2, hybrid cube-mesh of 6 NVLink 2 "
            "links x 25 GB/s per GPU, 4x 100 Gb/s EDR InfiniBand); per-pair link counts from NCCL's topology dump "
            "(NVIDIA/nccl#671)", pcie_bw=_PCIE3_BW, mesh_links=DGX1_V100_NVLINKS, mesh_class="nvlink"),
    _preset("mi300x-platform", 8, "mesh", 64e9, _NVLINK4.alpha, 8, 400,
            "AMD Instinct MI300X platform datasheet (full xGMI mesh, 7 links x 128 GB/s both ways = 896 GB/s "
            "aggregate); one 400 Gb/s NIC per GPU"),
    _preset("pcie-8gpu", 8, "pcie", _PCIE4_BW, _PCIE5.alpha, 4, 400,
            "NVIDIA L40S datasheet (PCIe Gen4 x16, 64 GB/s both ways); NVIDIA enterprise reference configuration "
            "2-8-5-200 (4x 400 Gb/s NICs for 8 GPUs)", pcie_bw=_PCIE4_BW),
    _preset("aws-p5", 8, "nvswitch", _NVLINK4.bandwidth, _NVLINK4.alpha, 32, 100,
            "AWS EC2 P5 instance page (p5.48xlarge: 8x H100, NVSwitch 900 GB/s, 3200 Gbps EFA = 32x 100 Gb/s); "
            "aws-ofi-nccl stripes each GPU over its 4 EFA devices", nvls=True),
)}


def get_cluster(name: str, nodes: int = 1) -> Cluster:
    """The preset ``name`` with ``nodes`` nodes. Raises ValueError naming the presets (and close matches);
    for ``"custom"``, saying that a custom cluster is built from its numbers (:func:`custom_cluster`)."""
    if name == "custom":
        raise ValueError("topology 'custom' is not a preset: it is built from its numbers, with custom_cluster(...) "
                         "or 'ringlab cost --topology custom --gpus-per-node G --gpu-gbs B'; here give a preset: "
                         + ", ".join(PRESETS))
    if not isinstance(name, str) or name not in PRESETS:
        close = difflib.get_close_matches(str(name), PRESETS, n=2)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        raise ValueError(f"unknown topology {name!r}{hint}; presets: {', '.join(PRESETS)}")
    return replace(PRESETS[name], nodes=nodes)


def custom_cluster(nodes: int, gpus_per_node: int, gpu_bandwidth: float, nics_per_node: int = 0,
                   nic_gbps: float = 0.0, fabric: str = "nvswitch", gpu_latency: float = _NVLINK4.alpha,
                   nic_latency: float = _NET.alpha, pcie_bandwidth: float = _PCIE5.bandwidth,
                   nvls: bool = False, sharp: bool = False, name: str = "custom") -> Cluster:
    """A cluster from plain numbers: bandwidths in bytes/s per direction, NICs in Gb/s as sold.

    ``gpu_bandwidth`` is per GPU port (nvswitch, pcie) or per link (mesh). Raises ValueError as
    :class:`~ringlab.topology.cluster.Cluster` does.
    """
    return Cluster(name, nodes, gpus_per_node, fabric, gpu_bandwidth, gpu_latency, nics_per_node, nic_gbps,
                   nic_latency, pcie_bandwidth, nvls=nvls, sharp=sharp,
                   source="custom: numbers given by the caller")
