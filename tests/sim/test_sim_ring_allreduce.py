"""The numpy simulator against direct reductions and the closed-form traffic."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ringlab
from ringlab.collectives import ring_all_gather_bytes, ring_all_reduce_bytes, ring_reduce_scatter_bytes

MUST_WORLD_SIZES = list(range(1, 65)) + [127, 128, 257]
INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOAT_DTYPES = ["float16", "float32", "float64", ml_dtypes.bfloat16]


def _numels(n):
    return sorted({1, max(n - 1, 0), n, n + 1})


def _float_input(n, numel, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal((n, numel)).astype(dtype)


@pytest.mark.parametrize("n", MUST_WORLD_SIZES)
def test_sum_equals_direct_sum_and_bytes_equal_closed_form(n):
    for numel in _numels(n):
        x = np.random.default_rng(n).integers(-1000, 1000, size=(n, numel), dtype=np.int64)
        res = ringlab.ring_allreduce(x)
        assert (res.outputs == x.sum(axis=0)).all()  # integers: exact
        assert res.traffic.bytes_sent.tolist() == ring_all_reduce_bytes(n, numel, 8).tolist()
        assert res.traffic.bytes_received.tolist() == np.roll(res.traffic.bytes_sent, 1).tolist()  # from r - 1
        assert res.traffic.steps == 2 * (n - 1)
        assert int(res.traffic.bytes_sent.sum()) == 2 * (n - 1) * x[0].nbytes


_MILLION = 1_000_003
_WINDOWS = np.random.default_rng(3).integers(-1000, 1000, size=_MILLION + 257, dtype=np.int32)


@pytest.mark.parametrize("n", MUST_WORLD_SIZES)
def test_a_million_and_three_elements_at_every_must_world_size(n):
    """numel = 1_000_003 (no world size here divides it): exact int32 sums and closed-form bytes.

    Rank r holds the window ``_WINDOWS[r : r + numel]``, so one random vector serves every
    world size without drawing N million numbers each time.
    """
    x = np.lib.stride_tricks.sliding_window_view(_WINDOWS, _MILLION)[:n]
    res = ringlab.ring_allreduce(x)
    want = x.sum(axis=0, dtype=np.int64)
    assert (res.outputs == want).all()
    assert res.traffic.bytes_sent.tolist() == ring_all_reduce_bytes(n, _MILLION, 4).tolist()
    assert int(res.traffic.bytes_sent.sum()) == 2 * (n - 1) * _MILLION * 4


@pytest.mark.parametrize("n", [2, 3, 8, 13])
def test_float32_large_uneven_message(n):
    numel = 1_000_003
    x = _float_input(n, numel)
    res = ringlab.ring_allreduce(x)
    exact = x.astype(np.float64).sum(axis=0)
    # Higham's recursive-summation bound with u = 2**-24
    bound = (n * 2.0**-24) / (1 - n * 2.0**-24) * np.abs(x.astype(np.float64)).sum(axis=0)
    assert (np.abs(res.outputs[0] - exact) <= bound).all()
    raw = res.outputs.view(np.uint32)
    assert (raw == raw[0]).all()  # bit-identical on every rank
    assert res.traffic.bytes_sent.tolist() == ring_all_reduce_bytes(n, numel, 4).tolist()


@pytest.mark.parametrize("n", [4, 8, 16, 64])
def test_bytes_per_rank_are_exactly_the_bound_when_n_divides_numel(n):
    numel = n * 1000
    res = ringlab.ring_allreduce(_float_input(n, numel))
    assert (res.traffic.bytes_sent == 2 * (n - 1) * numel * 4 // n).all()


def test_world_size_one_moves_nothing_and_returns_a_copy():
    x = _float_input(1, 10)
    res = ringlab.ring_allreduce(x)
    assert (res.outputs == x).all() and res.outputs is not x
    assert res.traffic.bytes_sent.tolist() == [0] and res.traffic.steps == 0


def test_numel_zero_works_with_no_traffic():
    res = ringlab.ring_allreduce(np.zeros((5, 0), dtype=np.float32))
    assert res.outputs.shape == (5, 0)
    assert res.traffic.total_bytes == 0 and res.traffic.steps == 8


def test_numel_smaller_than_world_size_leaves_empty_chunks():
    x = np.arange(21, dtype=np.int32).reshape(7, 3)
    res = ringlab.ring_allreduce(x)
    assert (res.outputs == x.sum(axis=0)).all()
    # chunks of 1,1,1,0,0,0,0 elements: rank r sends 2*3 - c[r+1] - c[r+2] elements
    expected = [4 * (6 - [1, 1, 1, 0, 0, 0, 0][(r + 1) % 7] - [1, 1, 1, 0, 0, 0, 0][(r + 2) % 7]) for r in range(7)]
    assert res.traffic.bytes_sent.tolist() == expected


def test_input_is_not_modified_and_shape_is_kept():
    x = _float_input(4, 24).reshape(4, 2, 3, 4)
    before = x.copy()
    res = ringlab.ring_allreduce(x)
    assert (x == before).all()
    assert res.outputs.shape == x.shape and res.outputs.dtype == x.dtype


def test_list_input():
    arrays = [np.full((3, 3), r, dtype=np.float64) for r in range(5)]
    assert (ringlab.ring_allreduce(arrays).outputs == 10.0).all()


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
def test_integer_ops_are_exact(dtype, op):
    n, numel = 7, 50
    info = np.iinfo(dtype)
    x = np.random.default_rng(1).integers(info.min, info.max, size=(n, numel), endpoint=True, dtype=dtype)
    with np.errstate(over="ignore"):
        expected = {"sum": np.sum, "prod": np.prod}[op](x, axis=0, dtype=x.dtype) if op in ("sum", "prod") else \
            {"max": np.max, "min": np.min}[op](x, axis=0)
    res = ringlab.ring_allreduce(x, op=op)
    assert res.outputs.dtype == x.dtype
    assert (res.outputs == expected).all()


def test_int8_sum_wraps_like_numpy_and_nccl():
    x = np.full((3, 4), 100, dtype=np.int8)
    res = ringlab.ring_allreduce(x)
    assert (res.outputs == np.int8(300 - 256)).all()  # 300 mod 256 = 44


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "avg"])
def test_float_ops_within_documented_bound(dtype, op):
    n, numel = 9, 101
    rng = np.random.default_rng(2)
    x = (1 + 0.1 * rng.standard_normal((n, numel)) if op == "prod" else rng.standard_normal((n, numel))).astype(dtype)
    x64 = x.astype(np.float64)
    u = float(ml_dtypes.finfo(dtype).eps) / 2
    gamma = lambda k: k * u / (1 - k * u)  # noqa: E731
    exact, bound = {
        "sum": (x64.sum(0), gamma(n) * np.abs(x64).sum(0)),
        "avg": (x64.mean(0), gamma(n + 1) * np.abs(x64).sum(0) / n),
        "prod": (x64.prod(0), gamma(n) * np.abs(x64.prod(0))),
        "max": (x64.max(0), 0.0),
        "min": (x64.min(0), 0.0),
    }[op]
    res = ringlab.ring_allreduce(x, op=op)
    assert res.outputs.dtype == np.dtype(dtype)
    assert (np.abs(res.outputs.astype(np.float64) - exact) <= bound).all()
    raw = res.outputs.view(np.uint8).reshape(n, -1)
    assert (raw == raw[0]).all()


@given(
    data=st.data(),
    n=st.integers(1, 20),
    numel=st.integers(0, 60),
    op=st.sampled_from(["sum", "max", "min"]),
)
def test_property_integer_all_reduce(data, n, numel, op):
    x = data.draw(hnp.arrays(np.int32, (n, numel), elements=st.integers(-(2**20), 2**20)))
    res = ringlab.ring_allreduce(x, op=op)
    expected = {"sum": np.sum, "max": np.max, "min": np.min}[op](x, axis=0) if numel else np.zeros(0, np.int32)
    assert (res.outputs == expected).all()
    assert res.traffic.bytes_sent.tolist() == ring_all_reduce_bytes(n, numel, 4).tolist()


@given(n=st.integers(1, 24), numel=st.integers(0, 80), seed=st.integers(0, 2**16))
def test_property_reduce_scatter_then_all_gather_is_all_reduce(n, numel, seed):
    x = np.random.default_rng(seed).integers(-50, 50, size=(n, numel)).astype(np.int64)
    rs = ringlab.reduce_scatter(x)
    parts = [np.asarray(p).reshape(-1) for p in rs.outputs]
    expected_parts = np.array_split(x.sum(axis=0), n)
    assert all((p == e).all() for p, e in zip(parts, expected_parts))
    assert rs.traffic.bytes_sent.tolist() == ring_reduce_scatter_bytes(n, numel, 8).tolist()
    ag = ringlab.all_gather(parts)
    assert (ag.outputs == x.sum(axis=0)).all()
    assert ag.traffic.bytes_sent.tolist() == ring_all_gather_bytes(n, numel, 8).tolist()


def test_reduce_scatter_equal_chunks_returns_an_array():
    x = np.ones((4, 8), dtype=np.float32)
    out = ringlab.reduce_scatter(x).outputs
    assert isinstance(out, np.ndarray) and out.shape == (4, 2) and (out == 4).all()


def test_all_gather_takes_a_rank_array():
    shards = np.arange(12, dtype=np.int16).reshape(4, 3)
    res = ringlab.all_gather(shards)
    assert (res.outputs == np.arange(12)).all()


def test_all_gather_refuses_shards_not_in_array_split_layout():
    with pytest.raises(ValueError, match="array_split"):
        ringlab.all_gather([np.ones(1), np.ones(3)])


def test_trace_records_every_transfer_and_matches_counters():
    n, numel = 5, 23
    res = ringlab.ring_allreduce(_float_input(n, numel), trace=True)
    ev = res.events
    assert len(ev.step) == n * 2 * (n - 1)
    sent = np.zeros(n, dtype=np.int64)
    np.add.at(sent, ev.src, ev.nbytes)
    assert sent.tolist() == res.traffic.bytes_sent.tolist()
    first = (ev.step == 1) & (ev.src == 2)
    assert ev.chunk[first].tolist() == [(2 - 1) % n] and ev.reduce[first].tolist() == [True]
    assert ringlab.ring_allreduce(_float_input(n, numel)).events is None


def test_per_step_counters():
    n, numel = 4, 10  # chunks 3, 3, 2, 2 elements of 4 bytes
    res = ringlab.ring_allreduce(np.zeros((n, numel), dtype=np.float32))
    sizes = [3, 3, 2, 2]
    for s in range(n - 1):
        assert res.traffic.per_step_sent[s].tolist() == [4 * sizes[(r - s) % n] for r in range(n)]


@pytest.mark.parametrize(
    "inputs, exc, match",
    [
        ([], ValueError, "empty"),
        ([np.ones(3), np.ones(4)], ValueError, "rank 1 has shape"),
        ([np.ones(3, np.float32), np.ones(3, np.float64)], TypeError, "different dtypes"),
        (np.array([["a", "b"], ["c", "d"]]), TypeError, "not supported"),
        (np.ones((2, 3), dtype=bool), TypeError, "not supported"),
        (np.ones((2, 3), dtype=np.complex64), TypeError, "not supported"),
        ("not an array", TypeError, "numpy array"),
        (np.array(3.0, dtype=np.float32), ValueError, "world_size axis"),
        (np.zeros((0, 4), dtype=np.float32), ValueError, "world_size axis"),
    ],
)
def test_bad_input_gets_a_clear_error(inputs, exc, match):
    with pytest.raises(exc, match=match):
        ringlab.ring_allreduce(inputs)


def test_unknown_op_and_int_avg_are_refused():
    with pytest.raises(ValueError, match="op must be one of"):
        ringlab.ring_allreduce(np.ones((2, 2)), op="mean")
    with pytest.raises(TypeError, match="avg"):
        ringlab.ring_allreduce(np.ones((2, 2), dtype=np.int32), op="avg")
