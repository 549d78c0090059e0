"""The single-NIC picture: every ring crossing of a node squeezed through one NIC."""

EXPECT = ["busbw_gbs should be 400 GB/s", "one NIC per node"]


def ring_bottleneck(nodes, gpus_per_node, nvlink_gbs, nics_per_node, nic_gbps):
    if nodes == 1:
        return "nvlink", nvlink_gbs
    return "nic", nic_gbps / 8  # bug: one channel, one NIC
