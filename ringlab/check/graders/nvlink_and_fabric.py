"""Graders for the cluster exercise: the link that binds a multi-channel ring all-reduce (topic 13, card 13).

* 13a ``ring_bottleneck(nodes, gpus_per_node, nvlink_gbs, nics_per_node, nic_gbps) -> (link, busbw_gbs)``.

Expected values are written out here from the closed form (card 13), not taken from
``ringlab.topology``: with one channel per GPU, a GPU's NVLink port carries (G-1)/G of its ring
traffic and the node's NICs the rest, so busbw is at most ``G/(G-1) x NVLink`` and at most
``NICs x Gb/s / 8``; on one node it is the NVLink rate. When an answer is wrong the grader names
the known wrong model it matches (one NIC per node, bits for bytes, both NVLink directions, ...).
"""

from __future__ import annotations

import math
from ..engine import CaseFailure, run_grader
from ..exercise import Exercise

REL_TOL = 1e-9


def ring_cases() -> list[dict]:
    """Two DGX H100 nodes (8 GPUs, 8 x 400 Gb/s NICs each) first, then one node, XDR NICs (NVLink binds), A100 with 4 NICs, one GPU per
    node, GB200 NVL72 racks, a PCIe-class box, an odd GPU count, and two ties (the spec answers "nvlink")."""
    return [
        {"nodes": 2, "gpus_per_node": 8, "nvlink_gbs": 450, "nics_per_node": 8, "nic_gbps": 400},
        {"nodes": 1, "gpus_per_node": 8, "nvlink_gbs": 450, "nics_per_node": 8, "nic_gbps": 400},
        {"nodes": 4, "gpus_per_node": 8, "nvlink_gbs": 450, "nics_per_node": 8, "nic_gbps": 800},
        {"nodes": 2, "gpus_per_node": 8, "nvlink_gbs": 300, "nics_per_node": 4, "nic_gbps": 200},
        {"nodes": 2, "gpus_per_node": 1, "nvlink_gbs": 450, "nics_per_node": 1, "nic_gbps": 200},
        {"nodes": 3, "gpus_per_node": 72, "nvlink_gbs": 900, "nics_per_node": 72, "nic_gbps": 400},
        {"nodes": 8, "gpus_per_node": 8, "nvlink_gbs": 32, "nics_per_node": 4, "nic_gbps": 400},
        {"nodes": 2, "gpus_per_node": 3, "nvlink_gbs": 100, "nics_per_node": 3, "nic_gbps": 800},
        # ties: both links saturate at the same busbw (100 and 200 GB/s, exact in floating point in any order)
        {"nodes": 2, "gpus_per_node": 2, "nvlink_gbs": 50, "nics_per_node": 1, "nic_gbps": 800},
        {"nodes": 4, "gpus_per_node": 2, "nvlink_gbs": 100, "nics_per_node": 2, "nic_gbps": 800},
    ]


def ring_strategy():
    """Hypothesis strategy: 1-16 nodes, 1-16 GPUs, NICs a divisor of the GPU count, common rates."""
    from hypothesis import strategies as st

    def case(g):
        return st.fixed_dictionaries({
            "nodes": st.integers(1, 16), "gpus_per_node": st.just(g),
            "nvlink_gbs": st.sampled_from([32, 64, 150, 200, 300, 450, 900]),
            "nics_per_node": st.sampled_from([d for d in range(1, g + 1) if g % d == 0]),
            "nic_gbps": st.sampled_from([100, 200, 400, 800]),
        })

    return st.integers(1, 16).flatmap(case)


def check_ring(fn, nodes: int, gpus_per_node: int, nvlink_gbs: float, nics_per_node: int, nic_gbps: float) -> None:
    """13a: the binding link and min(G/(G-1) x NVLink, NICs x Gb/s / 8) (NVLink alone on one node)."""
    g = gpus_per_node
    rails = nics_per_node * nic_gbps / 8
    if nodes == 1:
        want = ("nvlink", float(nvlink_gbs))
    elif g == 1:
        want = ("nic", rails)
    else:
        port = nvlink_gbs * g / (g - 1)
        want = ("nic", rails) if rails < port and not math.isclose(rails, port, rel_tol=REL_TOL) else ("nvlink", port)
    result = fn(nodes, gpus_per_node, nvlink_gbs, nics_per_node, nic_gbps)
    if not isinstance(result, tuple) or len(result) != 2:
        raise CaseFailure(f"ring_bottleneck should return a tuple (link, busbw_gbs), got {result!r}")
    link, busbw = result
    if isinstance(busbw, bool) or not isinstance(busbw, (int, float)) or not math.isfinite(busbw):
        raise CaseFailure(f"busbw_gbs should be a finite number of GB/s, got {busbw!r}")
    known = {
        "that is one NIC per node: NCCL's channels leave the node through every GPU's NIC, not one": nic_gbps / 8,
        "that counts the NICs in bits: NICs are sold in Gb/s, divide by 8 for GB/s": nics_per_node * nic_gbps,
        "that takes NVLink both ways; busbw compares with one direction": 2 * nvlink_gbs,
        "that is the NICs alone; each GPU's NVLink port also carries (G-1)/G of its ring's bytes": rails,
        "that is NVLink's bound, but the NICs give less: NICs are sold in bits, so nics x Gb/s / 8 GB/s":
            nvlink_gbs * g / max(g - 1, 1) if nodes > 1 else math.nan,
        "on several nodes one hop per GPU leaves the node, so NVLink carries (G-1)/G of the traffic and "
        "reaches G/(G-1) x its rate": float(nvlink_gbs),
    }
    if not math.isclose(busbw, want[1], rel_tol=REL_TOL):
        hint = next((f"; {why}" for why, v in known.items() if v != want[1] and math.isclose(busbw, v, rel_tol=REL_TOL)),
                    "")
        raise CaseFailure(f"busbw_gbs should be {want[1]:.6g} GB/s ({want[0]} binds), got {busbw!r}{hint}")
    if link != want[0]:
        tie = nodes > 1 and g > 1 and math.isclose(rails, nvlink_gbs * g / (g - 1), rel_tol=REL_TOL)
        why = (f": on a tie (NVLink's G/(G-1) x {nvlink_gbs} and the NICs' {nics_per_node} x {nic_gbps} / 8 both "
               f"give {want[1]:.6g} GB/s) the spec names 'nvlink'" if tie else "")
        raise CaseFailure(f"link should be {want[0]!r} at {want[1]:.6g} GB/s, got {link!r}{why}")


def _ring(fn):
    return run_grader("13a", "ring_bottleneck", fn, check_ring, ring_cases(), ring_strategy(),
                      "the binding link and the line-rate busbw are right on every cluster tried")


EXERCISES = (
    Exercise("13a", "ring_bottleneck", "Which link binds a ring across NVLink nodes?",
             _ring, (
                 "Follow one GPU through one step of every channel: it sends one chunk per channel. How many of "
                 "those chunks go over NVLink, and how many leave the node through a NIC?",
                 "With one channel per GPU each GPU is the exit of exactly one channel: (G-1)/G of its bytes use "
                 "its NVLink port, and the node's NICs carry G exits between them. NICs are sold in bits.",
                 "busbw = min(G / (G - 1) * nvlink_gbs, nics_per_node * nic_gbps / 8) on several nodes (NIC alone "
                 "when G = 1), nvlink_gbs on one node; name the link that gives the minimum.",
             )),
)
