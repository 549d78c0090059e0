"""Card 13 (NVLink domain vs scale-out fabric): the values its text uses."""

from __future__ import annotations

from ringlab.calc.training.layout import ParallelLayout
from ringlab.calc.training.step import item_seconds
from ringlab.calc.training.traffic import TrafficItem
from ringlab.check.cards import Ask, Slip
from ringlab.collectives.cost import LINKS, busiest_bytes
from ringlab.topology import build_on_cluster, cost_of, get_cluster

ASKS = (
    Ask("fair_ratio", "NVLink 4 over one NDR port, per direction", unit="1", show="x", rel_tol=0.03),
    Ask("two_ms", "1 GiB ring all-reduce over 2 nodes, at line rate", unit="s", show="ms", rel_tol=0.05),
)
SLIPS = (
    Slip("fair_ratio", "quoted_ratio", "the ratio usually quoted: NVLink's both directions ({nv_total:.0f} GB/s) "
         "against one direction of NDR"),
    Slip("two_ms", "flat_ms", "the single-NIC picture: one ring with all of its traffic through one {ib_dir:.0f} GB/s "
         "NIC, while NCCL's channels use all {nics} rails"),
    Slip("two_ms", "one_ms", "that is the one-node time; over two nodes part of each ring's traffic crosses the NICs"),
)


def values() -> dict:
    """NVLink vs NDR per direction; a 1 GiB ring all-reduce on one and two DGX H100 nodes, NCCL-style
    channels (one NIC per ring crossing) against one ring through one NIC; a 1 GiB all-to-all over the same
    GPUs, its cross-node share on every GPU's NIC (``ringlab.calc.training.step.item_seconds``)."""
    nv, ib = LINKS["nvlink4"], LINKS["ib-ndr"]
    one, two = get_cluster("dgx-h100", 1), get_cluster("dgx-h100", 2)
    t1 = cost_of(build_on_cluster("all_reduce", "ring_channels", one), one, 2**30)
    t2 = cost_of(build_on_cluster("all_reduce", "ring_channels", two), two, 2**30)
    flat = cost_of(build_on_cluster("all_reduce", "ring", two), two, 2**30)
    tp = cost_of(build_on_cluster("all_reduce", "ring_channels", two), two, 2**20)
    tp1 = cost_of(build_on_cluster("all_reduce", "ring_channels", one), one, 2**20)

    def all_to_all(cluster) -> tuple[float, int, int]:
        """Seconds of one 1 GiB all-to-all over every GPU of ``cluster`` as an expert-parallel group, the bytes
        each rank sends, and the part of them bound for other nodes."""
        n, g = cluster.world_size, cluster.gpus_per_node
        sent = busiest_bytes("all_to_all", "pairwise", n, 2**30)
        item = TrafficItem("ep", "all_to_all", "forward", n, 1, 2**30, sent, "tokens")
        return item_seconds(item, ParallelLayout(dp=n, ep=n), cluster), sent, sent * (n - g) // (n - 1)

    a2a_one, _, _ = all_to_all(one)
    a2a_two, a2a_sent, a2a_out = all_to_all(two)
    return {"nv_dir": nv.bandwidth / 1e9, "nv_total": 2 * nv.bandwidth / 1e9,
            "ib_dir": ib.bandwidth / 1e9, "ib_gbit": ib.bandwidth * 8 / 1e9,
            "quoted_ratio": 2 * nv.bandwidth / ib.bandwidth, "fair_ratio": nv.bandwidth / ib.bandwidth,
            "nics": two.nics_per_node, "node_gbs": two.node_network_bandwidth / 1e9,
            "one_ms": t1.line_rate_seconds * 1e3, "two_ms": t2.line_rate_seconds * 1e3,
            "two_ratio": t2.line_rate_seconds / t1.line_rate_seconds, "two_step_ms": t2.seconds * 1e3,
            "flat_ms": flat.seconds * 1e3, "flat_ratio": flat.seconds / t1.seconds,
            "leave": t2.inter_node_fraction, "tp_us": tp.seconds * 1e6, "tp1_us": tp1.seconds * 1e6,
            "a2a_one_ms": a2a_one * 1e3, "a2a_two_ms": a2a_two * 1e3, "a2a_sent_gb": a2a_sent / 1e9,
            "a2a_out_gb": a2a_out / 1e9, "a2a_out_share": a2a_out / a2a_sent}
