"""Rates a topology preset states itself agree with the hardware presets of the layer above."""

from ringlab.calc.hardware import HARDWARE
from ringlab.topology import get_cluster
from ringlab.topology.presets import NVLINK3_BANDWIDTH


def test_nvlink3_is_the_a100_interconnect_bandwidth():
    """DGX A100 times its NVLink at the A100 SXM4 datasheet's 600 GB/s both ways, as calc's A100 presets do."""
    assert NVLINK3_BANDWIDTH == 300e9
    for name in ("a100-sxm-40gb", "a100-sxm-80gb"):
        assert HARDWARE[name].interconnect_bandwidth == NVLINK3_BANDWIDTH
    assert get_cluster("dgx-a100").gpu_bandwidth == NVLINK3_BANDWIDTH
