from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

from ringlab.calc import STRATEGIES, bus_bandwidth, grad_comm_bytes, ring_bytes_per_rank

P, N = 7 * 10**9, 64
M = 2 * P  # bf16 bytes of one full copy


def test_p2_ddp_and_full_shard():
    ddp = grad_comm_bytes("ddp", 7e9, 64)
    assert ddp.bytes_sent_per_rank == 27_562_500_000 and isinstance(ddp.bytes_sent_per_rank, int)
    fs = grad_comm_bytes("fsdp_full_shard", 7e9, 64)
    assert fs.bytes_sent_per_rank == 41_343_750_000 == 3 * 63 * M // 64
    assert fs.bytes_sent_per_rank * 2 == 3 * ddp.bytes_sent_per_rank  # 1.5x, not 2x
    assert [(c.collective, c.phase) for c in fs.breakdown] == [
        ("all_gather", "forward"), ("all_gather", "backward"), ("reduce_scatter", "backward")]
    assert grad_comm_bytes("zero3", P, N).bytes_sent_per_rank == fs.bytes_sent_per_rank


@pytest.mark.parametrize("strategy", ["zero1", "zero2", "fsdp_shard_grad_op"])
def test_two_collective_strategies_equal_ddp_volume(strategy):
    r = grad_comm_bytes(strategy, P, N)
    assert r.bytes_sent_per_rank == 2 * 63 * M // 64 == 27_562_500_000
    assert sorted(c.collective for c in r.breakdown) == ["all_gather", "reduce_scatter"]


def test_full_shard_without_reshard_is_shard_grad_op():
    a = grad_comm_bytes("fsdp_full_shard", P, N, reshard_after_forward=False)
    b = grad_comm_bytes("fsdp_shard_grad_op", P, N)
    assert a.bytes_sent_per_rank == b.bytes_sent_per_rank and a.memory == b.memory


def test_memory_zero_paper_2_2_12():
    psi = 7_500_000_000  # ZeRO paper fig. 1: 7.5B params, 64 GPUs
    assert grad_comm_bytes("ddp", psi, 64).memory.total == 16 * psi  # 120 GB
    assert grad_comm_bytes("zero1", psi, 64).memory.total == 4 * psi + 12 * psi // 64  # 31.4 GB
    assert grad_comm_bytes("zero2", psi, 64).memory.total == 2 * psi + 14 * psi // 64  # 16.6 GB
    assert grad_comm_bytes("zero3", psi, 64).memory.total == 16 * psi // 64  # 1.9 GB
    assert grad_comm_bytes("zero3", psi, 64, optimizer_bytes_per_param=8).memory.optimizer_states == 8 * psi // 64


def test_grad_accumulation():
    k = 4
    ddp = grad_comm_bytes("ddp", P, N, grad_accum_steps=k)
    assert ddp.bytes_sent_per_rank == grad_comm_bytes("ddp", P, N).bytes_sent_per_rank  # no_sync: once
    assert grad_comm_bytes("ddp", P, N, grad_accum_steps=k, no_sync=False).bytes_sent_per_rank == \
        k * ddp.bytes_sent_per_rank
    unit = 63 * M // 64
    fs = grad_comm_bytes("fsdp_full_shard", P, N, grad_accum_steps=k)
    assert fs.bytes_sent_per_rank == (2 * k + 1) * unit  # gathers every micro-batch, one reduce_scatter
    assert fs.memory.grads == M  # no_sync keeps unsharded gradients
    fs_sync = grad_comm_bytes("fsdp_full_shard", P, N, grad_accum_steps=k, no_sync=False)
    assert fs_sync.bytes_sent_per_rank == 3 * k * unit and fs_sync.memory.grads == M // 64
    assert grad_comm_bytes("zero2", P, N, grad_accum_steps=k).bytes_sent_per_rank == (k + 1) * unit
    assert grad_comm_bytes("zero1", P, N, grad_accum_steps=k).bytes_sent_per_rank == 2 * unit


def test_hybrid_shard():
    g = 8
    r = grad_comm_bytes("hybrid_shard", P, N, gpus_per_node=g)
    intra = 7 * M // 8
    inter = 2 * 7 * (M // 8) // 8
    assert r.bytes_sent_per_rank == 3 * intra + inter
    assert {c.group for c in r.breakdown} == {"intra-node", "inter-node"}
    assert r.memory.params == M // 8
    # one node: no inter-node traffic, same as FULL_SHARD over 8
    one = grad_comm_bytes("hybrid_shard", P, 8, gpus_per_node=8)
    assert one.bytes_sent_per_rank == grad_comm_bytes("fsdp_full_shard", P, 8).bytes_sent_per_rank


def test_time_uses_duck_typed_link_and_alpha():
    link = SimpleNamespace(alpha=5e-6, bandwidth=450e9)
    ddp = grad_comm_bytes("ddp", P, N)
    assert ddp.time(link) == pytest.approx(2 * 63 * 5e-6 + 27_562_500_000 / 450e9)
    slow = SimpleNamespace(alpha=0.0, bandwidth=50e9)
    h = grad_comm_bytes("hybrid_shard", P, N, gpus_per_node=8)
    inter = [c for c in h.breakdown if c.group == "inter-node"][0]
    assert h.time(link, slow) - h.time(link) == pytest.approx(
        inter.bytes_sent / 50e9 - inter.bytes_sent / 450e9 - inter.ring_steps * 5e-6)
    with pytest.raises(TypeError, match="alpha"):
        ddp.time(object())


def test_summary_labels_gb_and_gib():
    text = grad_comm_bytes("fsdp_full_shard", P, N).summary()
    assert "41,343,750,000 B (41.34 GB / 38.50 GiB)" in text and "GiB" in text


def test_single_rank_sends_nothing():
    assert grad_comm_bytes("ddp", P, 1).bytes_sent_per_rank == 0


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(strategy="fsdp_fullshard"), ValueError, "fsdp_full_shard"),
    (dict(n_params=0), ValueError, "n_params"), (dict(n_params=-7e9), ValueError, "n_params"),
    (dict(n_params=7.5), TypeError, "n_params"), (dict(world_size=0), ValueError, "world_size"),
    (dict(dtype="fp13"), ValueError, "unknown dtype"), (dict(dtype="int4"), ValueError, "sub-byte"),
    (dict(grad_accum_steps=0), ValueError, "grad_accum_steps"),
    (dict(strategy="hybrid_shard"), ValueError, "gpus_per_node"),
    (dict(strategy="hybrid_shard", gpus_per_node=7), ValueError, "divide"),
    (dict(strategy="ddp", reshard_after_forward=True), ValueError, "reshard_after_forward"),
])
def test_bad_inputs(kwargs, exc, match):
    args = dict(strategy="ddp", n_params=P, world_size=N) | kwargs
    with pytest.raises(exc, match=match):
        grad_comm_bytes(**args)


def test_ring_bytes_uneven_chunks_by_enumeration():
    # numel=10, N=4: array_split chunks [3, 3, 2, 2]; RS/AG busiest rank skips a 2-chunk: 8 elements
    assert ring_bytes_per_rank("reduce_scatter", 10, 4, 1) == 8
    # all_reduce skips two cyclically adjacent chunks, smallest pair (2, 2): 20 - 4
    assert ring_bytes_per_rank("all_reduce", 10, 4, 1) == 16
    # numel=11, N=4: chunks [3, 3, 3, 2]: smallest adjacent pair 3 + 2
    assert ring_bytes_per_rank("all_reduce", 11, 4, 2) == 2 * (22 - 5)
    assert ring_bytes_per_rank("all_gather", 3, 8, 4) == 4 * 3  # numel < N: empty chunks
    with pytest.raises(ValueError, match="collective"):
        ring_bytes_per_rank("broadcast", 10, 4, 1)


def _busiest_all_reduce(numel, n):
    """Direct enumeration of the rotation in DESIGN.md: rank r skips chunks (r+1)%N and (r+2)%N."""
    base, rem = divmod(numel, n)
    c = [base + (i < rem) for i in range(n)]
    return max(2 * numel - c[(r + 1) % n] - c[(r + 2) % n] for r in range(n))


@settings(max_examples=200, deadline=None)
@given(numel=st.integers(1, 10**6), n=st.integers(2, 300))
def test_all_reduce_busiest_rank_matches_enumeration(numel, n):
    assert ring_bytes_per_rank("all_reduce", numel, n, 1) == _busiest_all_reduce(numel, n)


@settings(max_examples=200, deadline=None)
@given(chunk=st.integers(1, 10**9), n=st.integers(1, 1024), itemsize=st.sampled_from([1, 2, 4]))
def test_ddp_is_exactly_2_n_minus_1_over_n_when_n_divides(chunk, n, itemsize):
    dtype = {1: "fp8", 2: "bf16", 4: "fp32"}[itemsize]
    numel = chunk * n
    r = grad_comm_bytes("ddp", numel, n, dtype=dtype)
    assert r.bytes_sent_per_rank * n == 2 * (n - 1) * numel * itemsize
    fs = grad_comm_bytes("fsdp_full_shard", numel, n, dtype=dtype)
    assert fs.bytes_sent_per_rank * 2 == 3 * r.bytes_sent_per_rank


@settings(max_examples=100, deadline=None)
@given(strategy=st.sampled_from([s for s in STRATEGIES if s != "hybrid_shard"]), numel=st.integers(1, 10**7),
       n=st.integers(1, 128), k=st.integers(1, 8))
def test_volumes_are_bounded_by_whole_message_multiples(strategy, numel, n, k):
    r = grad_comm_bytes(strategy, numel, n, grad_accum_steps=k, dtype="fp32")
    calls = sum(c.count * (2 if c.collective == "all_reduce" else 1) for c in r.breakdown)
    assert 0 <= r.bytes_sent_per_rank <= calls * 4 * numel


def test_bus_bandwidth_definition():
    # a ring at link speed B moves 2(N-1)/N x S in time t -> busbw = B
    s, n, link = 10**9, 8, 100e9
    t = 2 * (n - 1) / n * s / link
    assert bus_bandwidth("all_reduce", s, t, n) == pytest.approx(link)
    assert bus_bandwidth("all_gather", s, (n - 1) / n * s / link, n) == pytest.approx(link)
    with pytest.raises(ValueError):
        bus_bandwidth("all_reduce", s, 0, n)


@pytest.mark.parametrize("collective, factor", [
    ("all_reduce", 2 * 7 / 8), ("reduce_scatter", 7 / 8), ("all_gather", 7 / 8), ("all_to_all", 7 / 8),
    ("broadcast", 1.0), ("reduce", 1.0),
])
def test_bus_bandwidth_covers_all_six_collectives(collective, factor):
    # nccl-tests doc/PERFORMANCE.md factors; calc's bus_bandwidth is the collectives' busbw itself.
    from ringlab.collectives.cost import busbw

    assert bus_bandwidth is busbw
    assert bus_bandwidth(collective, 8e9, 0.5, 8) == pytest.approx(16e9 * factor)
    with pytest.raises(ValueError, match="collective must be one of"):
        bus_bandwidth("allreduce", 8e9, 0.5, 8)


# 7e9 bf16 parameters on 64 ranks: every ring all_gather or reduce_scatter sends 63/64 x 14e9 B per rank.
_ONE = 63 * 14_000_000_000 // 64  # 13,781,250,000 B


@pytest.mark.parametrize("strategy, api, reshard_after_backward, no_sync, collectives", [
    # FSDP1 keeps SHARD_GRAD_OP's gathered parameters while no_sync() is active (_should_free_in_backward)
    ("fsdp_shard_grad_op", "fsdp1", None, True, 1 + 1),
    ("fsdp_shard_grad_op", "fsdp1", None, False, 4 + 4),  # syncing every micro-batch frees them every time
    # FSDP2 reshards after every backward unless told not to
    ("fsdp_shard_grad_op", "fsdp2", None, True, 4 + 1),
    ("fsdp_shard_grad_op", "fsdp2", False, True, 1 + 1),
    # FULL_SHARD frees after every forward in both: a forward and a backward gather per micro-batch
    ("fsdp_full_shard", "fsdp1", None, True, 4 + 4 + 1),
    ("fsdp_full_shard", "fsdp1", None, False, 4 + 4 + 4),
    ("fsdp_full_shard", "fsdp2", None, True, 4 + 4 + 1),
])
def test_fsdp_gathers_per_step_under_gradient_accumulation(strategy, api, reshard_after_backward, no_sync, collectives):
    g = grad_comm_bytes(strategy, 7e9, 64, grad_accum_steps=4, no_sync=no_sync, fsdp_api=api,
                        reshard_after_backward=reshard_after_backward)
    assert g.bytes_sent_per_rank == collectives * _ONE


def test_fsdp_api_flags_are_checked():
    with pytest.raises(ValueError, match="fsdp_api"):
        grad_comm_bytes("fsdp_full_shard", 7e9, 64, fsdp_api="fsdp3")
    with pytest.raises(ValueError, match="reshard_after_backward is FSDP2's flag"):
        grad_comm_bytes("fsdp_full_shard", 7e9, 64, reshard_after_backward=False)
    with pytest.raises(ValueError, match="reshard_after_backward is FSDP2's flag"):
        grad_comm_bytes("ddp", 7e9, 64, fsdp_api="fsdp2", reshard_after_backward=False)
