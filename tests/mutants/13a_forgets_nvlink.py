"""Across nodes only the NICs count: misses the case where NVLink binds first (XDR NICs)."""

EXPECT = ["should be 514.286 GB/s", "NICs alone"]


def ring_bottleneck(nodes, gpus_per_node, nvlink_gbs, nics_per_node, nic_gbps):
    if nodes == 1:
        return "nvlink", nvlink_gbs
    return "nic", nics_per_node * nic_gbps / 8  # bug: NVLink never binds
