"""Ring collectives in real gloo processes against torch.distributed, the direct sum, the simulator and the closed form.

One launch of 5 processes covers world sizes 1..5: every rank joins subgroups of the first
k ranks (k = 1..4) and a subgroup {1, 3, 4} (group ranks differ from global ranks); k = 5 is
the default group. Each rank returns its inputs and everything it got back; the tests below
check those numbers in this process.
"""

import numpy as np
import pytest

import ringlab
from ringlab.collectives import (
    Schedule,
    Transfer,
    chunk_sizes,
    ring_all_gather_bytes,
    ring_all_reduce_bytes,
    ring_reduce_scatter_bytes,
)
from ringlab.sim import run_schedule as sim_run_schedule

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():  # pragma: no cover
    pytest.skip("torch.distributed is not available", allow_module_level=True)

from ringlab.dist import (  # noqa: E402
    executor,
    launch,
    run_ring_all_gather,
    run_ring_all_reduce,
    run_ring_reduce_scatter,
    run_schedule,
)

pytestmark = pytest.mark.slow  # each test launches ranks as processes: seconds each

WORLD = 5
GROUPS = {"k1": [0], "k2": [0, 1], "k3": [0, 1, 2], "k4": [0, 1, 2, 3], "k5": None, "r134": [1, 3, 4]}
DTYPES = {"float32": torch.float32, "int64": torch.int64, "bfloat16": torch.bfloat16}
LIB_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.SUM}


def _cases(k):
    """(numel, dtype, op, piece bytes): the last two cut each chunk into many messages."""
    numels = sorted({0, 1, max(k - 1, 0), k, k + 1, 2 * k + 1, 1001})
    cases = [(numel, dtype, "sum", None) for numel in numels for dtype in ("float32", "int64")]
    return cases + [(2 * k + 1, "bfloat16", "sum", None), (1001, "float32", "max", None),
                    (1001, "float32", "avg", None), (1001, "int64", "sum", 24), (2 * k + 1, "float32", "sum", 8)]


def _input(global_rank, numel, dtype, case_id):
    g = torch.Generator().manual_seed(1000 * case_id + global_rank)
    if dtype == "int64":
        return torch.randint(-1000, 1000, (numel,), generator=g)
    return torch.randn(numel, generator=g).to(DTYPES[dtype])


def _library(x, op, group, k, collective):
    """torch.distributed's answer (gloo has no AVG: sum, then divide), or None where it cannot answer."""
    if collective == "all_reduce":
        y = x.clone()
        dist.all_reduce(y, op=LIB_OPS[op], group=group)
        return y / k if op == "avg" else y
    if x.numel() % k or x.numel() == 0:  # the tensor API needs equal, non-empty pieces
        return None
    if collective == "reduce_scatter":
        out = torch.empty(x.numel() // k, dtype=x.dtype)
        fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        fn(out, x.clone(), op=LIB_OPS[op], group=group)
        return out
    out = torch.empty(x.numel(), dtype=x.dtype)
    shard = x[dist.get_rank(group) * (x.numel() // k):][: x.numel() // k].clone()
    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    fn(out, shard, group=group)
    return out


def _direct(n):
    """Not a ring: in one step every rank sends every chunk to every other rank, which adds it in.
    Ranks receive into chunks they are sending in the same step, and several times into one chunk."""
    step = tuple(Transfer(s, d, c, True) for s in range(n) for d in range(n) for c in range(n) if s != d)
    every = tuple(range(n))
    return Schedule("all_reduce", "direct", n, n, (step,), (every,) * n, (every,) * n)


def _numpy(t):
    return None if t is None else (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def _rank_checks():
    """Runs in every rank: all cases in every group this rank belongs to."""
    me = dist.get_rank()
    records = {}
    for name, members in GROUPS.items():
        group = None if members is None else dist.new_group(members)  # every rank calls new_group
        members = members or list(range(WORLD))
        if me not in members:
            continue
        k, group_rank = len(members), members.index(me)
        for case_id, (numel, dtype, op, piece_bytes) in enumerate(_cases(k)):
            default_piece, executor.PIECE_BYTES = executor.PIECE_BYTES, piece_bytes or executor.PIECE_BYTES
            x = _input(me, numel, dtype, case_id)
            ar = run_ring_all_reduce(x, op=op, group=group)
            rs = run_ring_reduce_scatter(x, op=op, group=group)
            bounds = [0] + np.cumsum(chunk_sizes(numel, k)).tolist()
            shard = x[bounds[group_rank]:bounds[group_rank + 1]]
            ag = run_ring_all_gather(shard, group=group, numel=numel)
            records[(name, case_id)] = {
                "rank": group_rank, "x": _numpy(x),
                "all_reduce": (_numpy(ar.output), ar.bytes_sent, ar.bytes_received),
                "reduce_scatter": (_numpy(rs.output), rs.bytes_sent, rs.bytes_received),
                "all_gather": (_numpy(ag.output), ag.bytes_sent, ag.bytes_received),
                "lib": {c: _numpy(_library(x, op, group, k, c))
                        for c in ("all_reduce", "reduce_scatter", "all_gather")},
            }
            executor.PIECE_BYTES = default_piece
    shaped = run_ring_all_reduce(torch.full((3, 7), float(me)))  # shape kept, default group
    records["shaped"] = (tuple(shaped.output.shape), _numpy(shaped.output))
    x = _input(me, 103, "float32", 999)
    buf = x.clone()
    records["direct"] = (_numpy(x), _numpy(buf), run_schedule(_direct(WORLD), buf))
    avg = x.clone()
    run_schedule(_direct(WORLD), avg, op="avg")
    records["direct_avg"] = _numpy(avg)
    return records


@pytest.fixture(scope="module")
def ranks():
    return launch(_rank_checks, WORLD, timeout=80)


def _gather(ranks, name, case_id):
    """This case's per-rank records, ordered by group rank."""
    recs = [r[(name, case_id)] for r in ranks if (name, case_id) in r]
    return sorted(recs, key=lambda rec: rec["rank"])


def _reference(xs, op):
    x64 = xs.astype(np.float64)
    return {"sum": x64.sum(0), "max": x64.max(0), "avg": x64.mean(0)}[op]


def _tolerance(dtype, k, xs):
    if dtype == "int64":
        return 0.0
    u = 2.0**-8 if dtype == "bfloat16" else 2.0**-24
    return (k + 1) * u / (1 - (k + 1) * u) * np.abs(xs.astype(np.float64)).sum(0)  # Higham's gamma_(k+1)


@pytest.mark.parametrize("name", list(GROUPS))
def test_all_reduce_equals_library_and_direct_sum_and_bytes_equal_closed_form(ranks, name):
    k = len(GROUPS[name] or range(WORLD))
    for case_id, (numel, dtype, op, _) in enumerate(_cases(k)):
        recs = _gather(ranks, name, case_id)
        assert len(recs) == k
        xs = np.stack([r["x"] for r in recs])
        exact, tol = _reference(xs, op), _tolerance(dtype, k, xs)
        itemsize = {"float32": 4, "int64": 8, "bfloat16": 2}[dtype]
        closed = ring_all_reduce_bytes(k, numel, itemsize)
        for r, rec in enumerate(recs):
            out, sent, received = rec["all_reduce"]
            assert (np.abs(out - exact) <= tol).all(), (name, numel, dtype, op, r)
            assert (np.abs(rec["lib"]["all_reduce"] - exact) <= tol).all()
            if dtype == "int64":
                assert (out == rec["lib"]["all_reduce"]).all()
            assert (sent, received) == (closed[r], closed[(r - 1) % k]), (name, numel, r)
            assert (out == recs[0]["all_reduce"][0]).all()  # every rank holds the same bits


@pytest.mark.parametrize("name", list(GROUPS))
def test_reduce_scatter_and_all_gather_equal_direct_sum_library_and_closed_form(ranks, name):
    k = len(GROUPS[name] or range(WORLD))
    for case_id, (numel, dtype, op, _) in enumerate(_cases(k)):
        recs = _gather(ranks, name, case_id)
        xs = np.stack([r["x"] for r in recs])
        exact, tol = _reference(xs, op), _tolerance(dtype, k, xs)
        itemsize = {"float32": 4, "int64": 8, "bfloat16": 2}[dtype]
        bounds = [0] + np.cumsum(chunk_sizes(numel, k)).tolist()
        rs_bytes, ag_bytes = ring_reduce_scatter_bytes(k, numel, itemsize), ring_all_gather_bytes(k, numel, itemsize)
        for r, rec in enumerate(recs):
            piece, sent, received = rec["reduce_scatter"]
            lo, hi = bounds[r], bounds[r + 1]
            assert piece.shape == (hi - lo,)
            assert (np.abs(piece - exact[lo:hi]) <= tol[lo:hi] if dtype != "int64" else piece == exact[lo:hi]).all()
            if rec["lib"]["reduce_scatter"] is not None:
                lib = rec["lib"]["reduce_scatter"]
                assert (np.abs(piece - lib) <= 2 * tol[lo:hi] if dtype != "int64" else piece == lib).all()
            assert (sent, received) == (rs_bytes[r], rs_bytes[(r - 1) % k])
            gathered, sent, received = rec["all_gather"]
            assert (gathered == xs[0] if k == 1 else gathered == np.concatenate(
                [xs[q][bounds[q]:bounds[q + 1]] for q in range(k)])).all()
            if rec["lib"]["all_gather"] is not None:
                assert (gathered == rec["lib"]["all_gather"]).all()
            assert (sent, received) == (ag_bytes[r], ag_bytes[(r - 1) % k])


def test_ranks_get_the_simulators_bits(ranks):
    """Same schedule, same order of additions: the processes and the simulator agree bit for bit."""
    k = WORLD
    for case_id, (numel, dtype, op, _) in enumerate(_cases(k)):
        if dtype != "float32":
            continue
        recs = _gather(ranks, "k5", case_id)
        xs = np.stack([r["x"] for r in recs])
        sim = ringlab.ring_allreduce(xs, op=op)
        for r, rec in enumerate(recs):
            assert (rec["all_reduce"][0].view(np.uint32) == sim.outputs[r].view(np.uint32)).all()
            assert rec["all_reduce"][1] == sim.traffic.bytes_sent[r]


def test_shape_is_kept(ranks):
    for rec in ranks:
        shape, out = rec["shaped"]
        assert shape == (3, 7) and (out == sum(range(WORLD))).all()


def test_any_schedule_runs_in_processes_as_in_the_simulator(ranks):
    xs = np.stack([r["direct"][0] for r in ranks])
    sim = sim_run_schedule(_direct(WORLD), xs)
    sim_avg = sim_run_schedule(_direct(WORLD), xs, op="avg")  # avg divides the sum by N, in processes as here
    for r, rec in enumerate(ranks):
        assert (rec["direct_avg"].view(np.uint32) == sim_avg.outputs[r].view(np.uint32)).all()
        assert np.allclose(rec["direct_avg"], xs.astype(np.float64).sum(0) / WORLD, atol=1e-5)
    for r, rec in enumerate(ranks):
        _, out, (sent, received) = rec["direct"]
        assert (out.view(np.uint32) == sim.outputs[r].view(np.uint32)).all()
        assert (sent, received) == (sim.traffic.bytes_sent[r], sim.traffic.bytes_received[r])
