"""Takes NVLink's 900 GB/s (both directions) for the per-direction rate on one node."""

EXPECT = ["busbw_gbs should be 450 GB/s", "both ways"]


def ring_bottleneck(nodes, gpus_per_node, nvlink_gbs, nics_per_node, nic_gbps):
    if nodes == 1:
        return "nvlink", 2 * nvlink_gbs  # bug: both directions
    rails = nics_per_node * nic_gbps / 8
    port = nvlink_gbs * gpus_per_node / max(gpus_per_node - 1, 1)
    return ("nic", rails) if rails < port else ("nvlink", port)
