"""13a : which link binds a ring all-reduce across NVLink nodes, and what busbw can it reach?

Grade it: ``ringlab check 13a`` or, in a notebook, ``ringlab.check.grade("13a")``.
Hints: ``ringlab.check.hint("13a", 1)`` (2 and 3 say more).
"""


def ring_bottleneck(nodes, gpus_per_node, nvlink_gbs, nics_per_node, nic_gbps):
    """The link that binds an NCCL-style multi-channel ring all-reduce, and its line-rate busbw.

    The cluster: ``nodes`` nodes of ``gpus_per_node`` GPUs. Inside a node every GPU has one NVSwitch
    port of ``nvlink_gbs`` GB/s per direction. Each node has ``nics_per_node`` NICs of ``nic_gbps``
    Gb/s (bits, as NICs are sold), shared evenly by the GPUs (``nics_per_node`` divides
    ``gpus_per_node``). NCCL runs one ring per GPU (channels); channel c leaves every node through
    GPU c's NIC, so every GPU is the exit of one channel and every NIC carries the exits of its
    GPUs. Every hop of a ring carries the same bytes. Leave PCIe and latency out.

    Returns:
        ``(link, busbw_gbs)``: ``link`` is ``"nvlink"`` or ``"nic"`` (``"nvlink"`` on one node, and on
        a tie), ``busbw_gbs`` the busbw in GB/s (nccl-tests' definition) at which that link is saturated.
    """
    ### BEGIN SOLUTION
    g = gpus_per_node
    nvlink_bound = nvlink_gbs if nodes == 1 or g == 1 else nvlink_gbs * g / (g - 1)
    if nodes == 1:
        return "nvlink", nvlink_bound
    nic_bound = nics_per_node * nic_gbps / 8
    if g == 1 or nic_bound < nvlink_bound:
        return "nic", nic_bound
    return "nvlink", nvlink_bound
    ### END SOLUTION
