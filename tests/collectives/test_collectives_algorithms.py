"""Every (collective, algorithm) pair against direct computations and its closed-form traffic."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringlab.collectives import ALGORITHMS, COLLECTIVES, algorithms_for, chunk_sizes, get_schedule, replay
from ringlab.sim.runner import all_to_all_blocks, expected_outputs, run_collective

PAIRS = sorted(ALGORITHMS)
MUST_WORLD_SIZES = list(range(1, 34)) + [64, 100, 128]
POWERS_OF_TWO = [1, 2, 4, 8, 16, 32, 64, 128]


def _inputs(collective, x):
    """all_gather takes shards: rank r contributes chunk r of rank 0's row."""
    return np.array_split(x[0], x.shape[0]) if collective == "all_gather" else x


def _flat(collective, outputs):
    if collective == "reduce_scatter":
        return np.concatenate([np.asarray(o).reshape(-1) for o in outputs])
    return outputs


def _roots(collective, n):
    return sorted({0, n - 1, n // 2}) if collective in ("broadcast", "reduce") else [0]


@pytest.mark.parametrize("pair", PAIRS, ids="/".join)
def test_every_pair_matches_direct_computation_and_closed_form_bytes(pair):
    collective, algorithm = pair
    algo = ALGORITHMS[pair]
    for n in MUST_WORLD_SIZES:
        for numel in ([1, n + 3] if n <= 33 else [n + 3]):  # uneven; numel < n leaves empty chunks
            x = np.random.default_rng(n * 1000 + numel).integers(-50, 50, size=(n, numel), dtype=np.int64)
            for root in _roots(collective, n):
                inputs = _inputs(collective, x)
                res = run_collective(collective, algorithm, inputs, root=root)
                expected, tol = expected_outputs(collective, inputs, root=root)
                assert tol is None  # integers: exact
                assert np.array_equal(_flat(collective, res.outputs), expected), (n, numel, root)
                t = res.traffic
                assert t.bytes_sent.tolist() == algo.bytes_sent(n, numel, 8, root).tolist(), (n, numel, root)
                assert t.bytes_sent.sum() == t.bytes_received.sum()
                assert t.steps == algo.num_steps(n)


@pytest.mark.parametrize("pair", PAIRS, ids="/".join)
def test_replay_counts_every_contribution_exactly_once(pair):
    collective, algorithm = pair
    for n in range(1, 18):
        for root in _roots(collective, n):
            sched = get_schedule(collective, algorithm, n, root)
            *_, final = replay(sched)
            for r, chunks in enumerate(sched.outputs):
                for c in chunks:
                    if collective in ("all_reduce", "reduce_scatter", "reduce"):
                        expected = [1] * n
                    elif collective == "all_gather":
                        expected = [int(k == c) for k in range(n)]  # chunk c came from rank c
                    elif collective == "broadcast":
                        expected = [int(k == root) for k in range(n)]
                    else:  # all_to_all: chunk c of rank r is the block from rank r - c
                        expected = [int(k == (r - c) % n) for k in range(n)]
                    assert final[r, c].tolist() == expected, (n, root, r, c)


def _divisible_numel(n):
    return 2 * n * (1 << (n.bit_length() - 1))  # divisible by N, by p and by 2


@pytest.mark.parametrize("n", POWERS_OF_TWO)
def test_ring_and_rabenseifner_reach_the_bandwidth_lower_bound(n):
    numel = _divisible_numel(n)
    m = numel * 4
    for algorithm in ("ring", "rabenseifner"):
        sent = ALGORITHMS[("all_reduce", algorithm)].bytes_sent(n, numel, 4)
        assert (sent * n == 2 * (n - 1) * m).all(), algorithm  # 2(N-1)/N x M on every rank


def test_rabenseifner_is_not_bandwidth_optimal_off_powers_of_two():
    n, numel = 6, 48  # p = 4, rem = 2: ranks 1 and 3 absorb a partner and hand the result back
    sent = ALGORITHMS[("all_reduce", "rabenseifner")].bytes_sent(n, numel, 1)
    per_new_rank = (48 - 12) + (12 + 24)  # reduce-scatter + all-gather = 2(p-1)/p x 48 = 72
    assert sent.tolist() == [48, per_new_rank + 48, 48, per_new_rank + 48, per_new_rank, per_new_rank]
    assert sent.max() > 2 * (n - 1) / n * numel


@pytest.mark.parametrize("n", POWERS_OF_TWO)
def test_recursive_doubling_all_reduce_sends_m_log2_n(n):
    numel = 1001  # any size: the whole message travels at each step
    sent = ALGORITHMS[("all_reduce", "recursive_doubling")].bytes_sent(n, numel, 4)
    assert (sent == numel * 4 * int(np.log2(n))).all()


@pytest.mark.parametrize("collective, factor", [("all_reduce", 2), ("reduce_scatter", 1), ("all_gather", 1),
                                                ("all_to_all", 1)])
@pytest.mark.parametrize("n", [2, 3, 5, 8, 12])
def test_measured_busbw_factor_equals_nccl_tests_factor(collective, factor, n):
    numel = 7 * n
    x = np.ones((n, numel), dtype=np.float32)
    algorithm = "pairwise" if collective == "all_to_all" else "ring"
    res = run_collective(collective, algorithm, _inputs(collective, x))
    measured = res.traffic.bytes_sent.max() / (numel * 4)  # busbw / algbw = bytes through a rank / S
    assert measured == pytest.approx(factor * (n - 1) / n, rel=1e-12)


@pytest.mark.parametrize("algorithm", [a for a in algorithms_for("all_reduce") if a != "direct"])
@pytest.mark.parametrize("n", [3, 5, 8, 13])
def test_all_reduce_floats_bit_identical_on_every_rank(algorithm, n):
    x = np.random.default_rng(n).standard_normal((n, 257)).astype(np.float32)
    out = run_collective("all_reduce", algorithm, x).outputs
    raw = out.view(np.uint32)
    assert (raw == raw[0]).all()
    exact = x.astype(np.float64).sum(axis=0)
    bound = n * 2.0**-24 / (1 - n * 2.0**-24) * np.abs(x.astype(np.float64)).sum(axis=0)
    assert (np.abs(out[0] - exact) <= bound).all()


def test_direct_all_reduce_ranks_sum_in_different_orders():
    x = np.array([[1.0], [-1.0], [2.0**-30]], dtype=np.float32)
    out = run_collective("all_reduce", "direct", x).outputs[:, 0]
    # rank 0: (1 + -1) + 2**-30; rank 1: (-1 + 1) + 2**-30; rank 2: (2**-30 + 1) + -1 rounds to 0
    assert out.tolist() == [2.0**-30, 2.0**-30, 0.0]
    ints = np.random.default_rng(0).integers(-9, 9, size=(6, 40))
    assert (run_collective("all_reduce", "direct", ints).outputs == ints.sum(axis=0)).all()  # exact: order-free
    assert ALGORITHMS[("all_reduce", "direct")].bit_identical is False


@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "avg"])
@pytest.mark.parametrize("pair", [p for p in PAIRS if p[0] in ("all_reduce", "reduce_scatter", "reduce")], ids="/".join)
def test_reducing_pairs_float_ops_within_higham_bound(pair, op):
    n = 7
    rng = np.random.default_rng(1)
    x = (1 + 0.1 * rng.standard_normal((n, 50)) if op == "prod" else rng.standard_normal((n, 50))).astype(np.float32)
    res = run_collective(*pair, x, op=op, root=2 if pair[0] == "reduce" else 0)
    expected, tol = expected_outputs(pair[0], x, op=op, root=2 if pair[0] == "reduce" else 0)
    got = _flat(pair[0], res.outputs).astype(np.float64)
    assert (np.abs(got - expected) <= tol).all()


@given(pair=st.sampled_from(PAIRS), n=st.integers(1, 40), numel=st.integers(0, 300),
       itemsize=st.sampled_from([1, 2, 4, 8]), root_frac=st.floats(0, 0.999))
def test_closed_forms_equal_the_schedules_own_count(pair, n, numel, itemsize, root_frac):
    algo = ALGORITHMS[pair]
    root = int(root_frac * n) if algo.rooted else 0
    sched = algo(n, root)
    assert algo.bytes_sent(n, numel, itemsize, root).tolist() == sched.bytes_sent(numel, itemsize).tolist()
    assert sched.num_steps == algo.num_steps(n)
    sent, received = sched.bytes_per_step(numel, itemsize)
    assert sent.sum() == received.sum()


@given(pair=st.sampled_from(PAIRS), n=st.integers(1, 12), numel=st.integers(0, 40), seed=st.integers(0, 2**16))
def test_simulator_matches_direct_computation_property(pair, n, numel, seed):
    collective, algorithm = pair
    x = np.random.default_rng(seed).integers(-2**31, 2**31, size=(n, numel), dtype=np.int64).astype(np.int32)
    root = seed % n if collective in ("broadcast", "reduce") else 0
    inputs = _inputs(collective, x)
    with np.errstate(over="ignore"):
        res = run_collective(collective, algorithm, inputs, root=root)
        expected, _ = expected_outputs(collective, inputs, root=root)
    assert np.array_equal(_flat(collective, res.outputs), expected)  # int32 sums wrap identically


def test_all_to_all_even_sizes_is_a_block_transpose():
    n, b = 4, 3
    x = np.arange(n * n * b).reshape(n, n * b)  # rank s, block d = elements [d*b, (d+1)*b)
    out = run_collective("all_to_all", "pairwise", x).outputs
    blocks = x.reshape(n, n, b)
    assert np.array_equal(out.reshape(n, n, b), blocks.transpose(1, 0, 2))


def test_all_to_all_uneven_block_sizes_are_documented_rotation():
    n, numel = 3, 5  # c = [2, 2, 1]: block s -> d has c[(d - s) % 3] elements
    assert all_to_all_blocks(n, numel).tolist() == [[2, 2, 1], [1, 2, 2], [2, 1, 2]]
    x = np.arange(n * numel).reshape(n, numel)
    out = run_collective("all_to_all", "pairwise", x).outputs
    # rank 0 receives rank 0's block 0 [0, 1], rank 1's block 0 [5], rank 2's block 0 [10, 11]
    assert out[0].tolist() == [0, 1, 5, 10, 11]


def test_broadcast_reads_only_the_root_row_and_reduce_returns_the_root_result():
    x = np.arange(12, dtype=np.float64).reshape(4, 3)
    for algorithm in algorithms_for("broadcast"):
        assert (run_collective("broadcast", algorithm, x, root=2).outputs == x[2]).all()
    for algorithm in algorithms_for("reduce"):
        out = run_collective("reduce", algorithm, x, root=3, op="max").outputs
        assert out.shape == (3,) and out.tolist() == [9.0, 10.0, 11.0]


def test_reduce_scatter_recursive_halving_uneven_outputs_per_rank():
    x = np.arange(5 * 7).reshape(5, 7)
    res = run_collective("reduce_scatter", "recursive_halving", x)
    full = x.sum(axis=0)
    assert [o.tolist() for o in res.outputs] == [p.tolist() for p in np.array_split(full, 5)]


def test_chunk_sizes_convention_for_halving_doubling():
    assert chunk_sizes(10, 4).tolist() == [3, 3, 2, 2]
    # Rabenseifner at N=4 on 10 elements: reduce-scatter sends numel - c[i], all-gather c[i] + pair block
    sent = ALGORITHMS[("all_reduce", "rabenseifner")].bytes_sent(4, 10, 1)
    assert sent.tolist() == [(10 - 3) + (3 + 6), (10 - 3) + (3 + 6), (10 - 2) + (2 + 4), (10 - 2) + (2 + 4)]


def test_registry_errors_name_valid_choices():
    with pytest.raises(ValueError, match="did you mean all_reduce"):
        get_schedule("allreduce", "ring", 4)
    with pytest.raises(ValueError, match="did you mean ring.*Valid pairs: all_reduce/ring"):
        get_schedule("all_reduce", "rnig", 4)
    with pytest.raises(ValueError, match="root applies to broadcast and reduce"):
        get_schedule("all_reduce", "ring", 4, root=1)
    with pytest.raises(ValueError, match="root"):
        get_schedule("broadcast", "binomial_tree", 4, root=4)
    with pytest.raises(ValueError, match="world_size"):
        get_schedule("all_to_all", "pairwise", 0)
    assert set(c for c, _ in ALGORITHMS) == set(COLLECTIVES)
