"""Card 13 (NVLink domain vs scale-out fabric): the values its text uses."""

from __future__ import annotations

from ringlab.check.cards import Ask

ASKS = (
    Ask("fair_ratio", "NVLink 4 over one NDR port, per direction", unit="1", show="x", rel_tol=0.03),
    Ask("two_ms", "1 GiB ring all-reduce over 2 nodes, at line rate", unit="s", show="ms", rel_tol=0.05),
)


def values() -> dict:
    """NVLink vs NDR per direction; a 1 GiB ring all-reduce on one and two DGX H100 nodes, NCCL-style
    channels (one NIC per ring crossing) against one ring through one NIC."""
    from ringlab.collectives.cost import LINKS
    from ringlab.topology import build_on_cluster, cost_of, get_cluster

    nv, ib = LINKS["nvlink4"], LINKS["ib-ndr"]
    one, two = get_cluster("dgx-h100", 1), get_cluster("dgx-h100", 2)
    t1 = cost_of(build_on_cluster("all_reduce", "ring_channels", one), one, 2**30)
    t2 = cost_of(build_on_cluster("all_reduce", "ring_channels", two), two, 2**30)
    flat = cost_of(build_on_cluster("all_reduce", "ring", two), two, 2**30)
    tp = cost_of(build_on_cluster("all_reduce", "ring_channels", two), two, 2**20)
    tp1 = cost_of(build_on_cluster("all_reduce", "ring_channels", one), one, 2**20)
    return {"nv_dir": nv.bandwidth / 1e9, "nv_total": 2 * nv.bandwidth / 1e9,
            "ib_dir": ib.bandwidth / 1e9, "ib_gbit": ib.bandwidth * 8 / 1e9,
            "quoted_ratio": 2 * nv.bandwidth / ib.bandwidth, "fair_ratio": nv.bandwidth / ib.bandwidth,
            "nics": two.nics_per_node, "node_gbs": two.node_network_bandwidth / 1e9,
            "one_ms": t1.line_rate_seconds * 1e3, "two_ms": t2.line_rate_seconds * 1e3,
            "two_ratio": t2.line_rate_seconds / t1.line_rate_seconds, "two_step_ms": t2.seconds * 1e3,
            "flat_ms": flat.seconds * 1e3, "flat_ratio": flat.seconds / t1.seconds,
            "leave": t2.inter_node_fraction, "tp_us": tp.seconds * 1e6, "tp1_us": tp1.seconds * 1e6}
