"""The alpha-beta fit and the line-rate ceiling, against closed forms and datasheet numbers."""

import statistics

import numpy as np
import pytest
from hypothesis import given, strategies as st

from ringlab.nccl import ceiling_busbw, fit_alpha_beta, gpu_link, read_texts
from ringlab.nccl.facts import Facts

from nccl_fixtures import fixture_text


@given(alpha=st.floats(1e-7, 1e-3), bandwidth=st.floats(1e8, 1e12), lo=st.integers(0, 10), n=st.integers(3, 30))
def test_fit_recovers_an_exact_alpha_beta_curve(alpha, bandwidth, lo, n):
    sizes = 2.0 ** np.arange(lo, lo + n)
    fit = fit_alpha_beta(sizes, alpha + sizes / bandwidth)
    assert fit.alpha == pytest.approx(alpha, rel=1e-6, abs=1e-12)
    assert fit.bandwidth == pytest.approx(bandwidth, rel=1e-6)
    assert fit.crossover == pytest.approx(alpha * bandwidth, rel=1e-5)
    assert fit.max_relative_residual < 1e-8


def test_fit_without_latency_clamps_alpha_to_zero():
    sizes = 2.0 ** np.arange(10, 20)
    fit = fit_alpha_beta(sizes, sizes / 5e9 - 1e-8)  # a line through a negative intercept
    assert fit.alpha == 0.0 and 4e9 < fit.bandwidth < 6e9


@pytest.mark.parametrize("sizes,times", [([8, 16], [1e-5, 1e-5]), ([8, 8, 8], [1e-5, 2e-5, 3e-5]),
                                         ([0, -1, 8], [1e-5, 1e-5, 1e-5]), ([8, 16, 32], [3e-5, 2e-5, 1e-5])])
def test_fit_declines_data_without_a_line(sizes, times):
    assert fit_alpha_beta(sizes, times) is None


def test_fit_rejects_mismatched_arrays():
    with pytest.raises(ValueError, match="differ in length"):
        fit_alpha_beta([1, 2, 3], [1.0, 2.0])


@pytest.mark.parametrize("name", ["nccl_tests_293_a100pcie_2node_gdr_sys.txt", "nccl_tests_369_gh200_2node_wrong.txt",
                                  "rccl_1129_mi100_iommu_pt.txt", "nccl_tests_287_rtx5090_4gpu_nccl226.txt"])
def test_fitted_alpha_is_the_small_size_time(name):
    """Where the smallest sizes take a flat ~15-20 us, alpha must be that latency (within 25%)."""
    run = read_texts([(name, fixture_text(name))]).runs[0]
    rows = sorted(run.rows, key=lambda r: r.size)
    fit = fit_alpha_beta([r.size for r in rows], [r.out_of_place.time_us * 1e-6 for r in rows])
    flat = statistics.median(r.out_of_place.time_us for r in rows[:6]) * 1e-6
    assert fit.alpha == pytest.approx(flat, rel=0.25)


@pytest.mark.parametrize("name,gbps", [
    ("NVIDIA H100 80GB HBM3", 450), ("NVIDIA H200", 450), ("NVIDIA GH200 120GB", 450), ("NVIDIA B200", 900),
    ("NVIDIA A100-SXM4-80GB", 300), ("A100-SXM4-40GB", 300), ("NVIDIA A800-SXM4-80GB", 200), ("NVIDIA H800", 200),
    ("Tesla V100-SXM2-32GB", 150), ("NVIDIA A100-PCIE-40GB", 32), ("NVIDIA A100 80GB PCIe", 32), ("NVIDIA H100 PCIe", 64),
    ("Tesla V100-PCIE-16GB", 16), ("Tesla T4", 16), ("NVIDIA A10G", 32), ("NVIDIA GeForce RTX 4090", 32),
    ("NVIDIA GeForce RTX 5090", 64), ("AMD Instinct MI300X", 448), ("AMD Instinct MI100", 32),
])
def test_link_class_per_gpu_datasheet(name, gbps):
    """Per-direction GB/s: NVLink totals halved (V100 300, A100 600, A800/H800 400, H100/H200 900, B200 1800);
    PCIe x16 Gen3/4/5 16/32/64; MI300X 7 x 64 (AMD datasheet)."""
    assert gpu_link(name).bandwidth == gbps * 1e9


@pytest.mark.parametrize("name", [None, "", "NVIDIA H100 NVL", "Some Future Accelerator"])
def test_unknown_or_ambiguous_gpus_have_no_link_class(name):
    assert gpu_link(name) is None


def test_ceiling_one_node_is_the_gpu_link():
    bw, why = ceiling_busbw(Facts(collective="all_reduce", world_size=8, nodes=1, gpu="NVIDIA H100 80GB HBM3"))
    assert bw == pytest.approx(450e9) and "ring_channels" in why and "nvlink4" in why


def test_ceiling_with_nvls_in_the_log_is_the_switch_reduction_once_the_ring_is_exceeded():
    facts = Facts(collective="all_reduce", world_size=8, nodes=1, gpu="NVIDIA H100 80GB HBM3", graphs=["Ring", "NVLS"])
    assert ceiling_busbw(facts)[0] == pytest.approx(450e9)  # no evidence the switch reduced: the ring
    bw, why = ceiling_busbw(facts, peak=480e9)  # nccl-tests#212: NVLS peaks at ~480 GB/s on 8 H100
    # every NVLink port carries M (1 + 1/N) each way (nccl#828, #1506): 2 (N - 1) / (N + 1) x 450 GB/s
    assert bw == pytest.approx(2 * 7 / 9 * 450e9) and "nvls" in why


def test_ceiling_across_nodes_is_the_rails_unless_the_tree_or_a_gpu_link_binds():
    facts = Facts(collective="all_reduce", world_size=16, nodes=2, gpu="NVIDIA H100 80GB HBM3", nics=8,
                  nic_bandwidth=400e9 / 8)
    assert ceiling_busbw(facts)[0] == pytest.approx(8 * 50e9)  # 8 rails x 50 GB/s < NVLink
    # above the rails on 2 nodes: the tree, bound by NVLink: 2(N-1)/N M per 2(G-1)/G M on a 450 GB/s port
    bw, why = ceiling_busbw(facts, peak=420e9)
    assert bw == pytest.approx(2 * 15 / 16 / (2 * 7 / 8) * 450e9) and "tree_chains" in why
    facts.nic_bandwidth = 800e9 / 8  # XDR: 8 x 100 GB/s; each GPU's exit channel (1 of 8) crosses its 64 GB/s PCIe
    assert ceiling_busbw(facts)[0] == pytest.approx(min(450e9 * 8 / 7, 64e9 * 8, 800e9))


@pytest.mark.parametrize("facts", [Facts(world_size=1, nodes=1, gpu="NVIDIA H100 80GB HBM3"),
                                   Facts(world_size=16, nodes=2, gpu="NVIDIA H100 80GB HBM3"),
                                   Facts(world_size=16, nodes=2, gpu="NVIDIA H100 80GB HBM3", nics=8),
                                   Facts(world_size=8, nodes=1, gpu="Unknown")])
def test_no_ceiling_without_the_facts(facts):
    assert ceiling_busbw(facts) is None
