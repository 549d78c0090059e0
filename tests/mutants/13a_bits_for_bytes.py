"""Adds up the NICs in Gb/s as if they were GB/s."""

EXPECT = ["busbw_gbs should be 400 GB/s", "in bits"]


def ring_bottleneck(nodes, gpus_per_node, nvlink_gbs, nics_per_node, nic_gbps):
    if nodes == 1:
        return "nvlink", nvlink_gbs
    rails = nics_per_node * nic_gbps  # bug: Gb/s, not GB/s
    port = nvlink_gbs * gpus_per_node / max(gpus_per_node - 1, 1)
    return ("nic", rails) if rails < port else ("nvlink", port)
