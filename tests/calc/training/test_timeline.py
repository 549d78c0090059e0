"""The stream simulator and exposure accounting of ringlab.calc.training.timeline, on hand-timed tasks."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringlab.calc.training.timeline import COMPUTE, Task, collective_time, simulate
from ringlab.collectives.cost import LINKS, Link


def compute(name, duration, deps=(), rank=0):
    return Task(name, rank, COMPUTE, duration, tuple(deps))


def comm(name, duration, deps=(), stream="dp", rank=0, peers=()):
    return Task(name, rank, stream, duration, tuple(deps), "all_reduce", 100, "dp all_reduce", peers, 8)


def test_streams_run_in_order_and_wait_for_dependencies():
    # compute: A [0,2], B [2,5]; comm: X after A [2,6], Y after B, queued behind X: [6,7]; C waits for X: [6,7]
    t = simulate([compute("A", 2), compute("B", 3), comm("X", 4, ["A"]), comm("Y", 1, ["B"]), compute("C", 1, ["X"])])
    assert [t.task(n) for n in "ABXYC"] == [(0, 2), (2, 5), (2, 6), (6, 7), (6, 7)]
    assert t.step_time == 7
    assert t.compute_time() == 6
    # X overlaps B (2..5) and is exposed 5..6; Y runs alongside C: hidden
    assert t.exposed() == {"X": 1.0, "Y": 0.0}
    assert t.exposed_total() == 1.0 == t.step_time - t.compute_time()
    assert t.exposed_intervals()["X"] == [(5.0, 6.0)]


def test_a_task_listed_before_its_dependency_on_another_stream_still_waits():
    t = simulate([comm("X", 1, ["A"]), compute("A", 3)])
    assert t.task("X") == (3, 4)


def test_exposed_total_counts_time_once_when_two_streams_are_exposed_together():
    t = simulate([comm("X", 4, stream="s1"), comm("Y", 2, stream="s2"), compute("A", 1, ["X", "Y"])])
    assert t.exposed() == {"X": 4.0, "Y": 2.0}
    assert t.exposed_total() == 4.0
    assert t.step_time == 5


def test_ranks_are_separate_and_a_send_counts_on_its_receiver():
    tasks = [compute("F0", 2, rank=0),
             Task("send", 0, "p2p->1", 1.0, ("F0",), "send_recv", 10, "pp send activation", (1,), 2),
             compute("F1", 2, ["send"], rank=1)]
    t = simulate(tasks)
    assert t.task("F1") == (3, 5)
    assert t.exposed(0) == {} and t.exposed(1) == {"send": 1.0}
    assert t.idle_time(1) == 2.0  # waiting for rank 0's forward: a bubble, not communication
    assert t.idle_time(0) == 3.0
    assert t.bytes_sent(0) == 10 and t.bytes_sent(1) == 0


def test_zero_duration_tasks_and_the_empty_timeline():
    assert simulate([]).step_time == 0.0
    t = simulate([compute("A", 0), comm("X", 0, ["A"])])
    assert t.step_time == 0 and t.exposed() == {"X": 0.0}


@pytest.mark.parametrize("tasks, match", [
    ([compute("A", 1), compute("A", 1)], "used twice"),
    ([compute("A", 1, ["nope"])], "unknown task 'nope'"),
    ([compute("A", 1, ["B"]), compute("B", 1, ["A"])], "can never start"),
    ([compute("A", 1), compute("B", 1, ["C"]), compute("C", 1)], "can never start"),  # C queued behind B
    ([compute("A", -1)], "duration"),
    ([compute("A", math.inf)], "duration"),
    ([Task("A", 0, "dp", 1.0)], "compute tasks run on stream"),
    ([Task("A", 0, COMPUTE, 1.0, (), "all_reduce")], "compute tasks run on stream"),
    ([Task("A", 0, "dp", 1.0, (), "broadcast_ish")], "collective must be"),
])
def test_bad_task_lists_are_refused_naming_the_problem(tasks, match):
    with pytest.raises(ValueError, match=match):
        simulate(tasks)


def test_non_tasks_are_refused():
    with pytest.raises(TypeError, match="Task objects"):
        simulate([("A", 1)])


@given(st.lists(st.tuples(st.floats(0, 5), st.floats(0, 5), st.integers(0, 3)), min_size=1, max_size=25))
def test_invariants_on_random_chains(spec):
    """Layer i: compute c_i, then a comm a_i that the compute k_i layers later waits for."""
    tasks = []
    for i, (c, a, lag) in enumerate(spec):
        deps = [f"C{i - 1}"] if i else []
        if i - lag - 1 >= 0 and lag:
            deps.append(f"X{i - lag - 1}")
        tasks += [compute(f"C{i}", c, deps), comm(f"X{i}", a, [f"C{i}"])]
    t = simulate(tasks)
    total_c, total_a = sum(c for c, _, _ in spec), sum(a for _, a, _ in spec)
    tol = 1e-9 * (1 + total_c + total_a)
    assert t.step_time >= total_c - tol and t.step_time >= t.comm_time(stream="dp") - tol
    assert t.comm_time() == pytest.approx(total_a)
    # one compute stream, one rank: every idle moment of the compute stream has a collective running
    assert t.exposed_total() == pytest.approx(t.step_time - total_c, abs=tol)
    assert t.exposed_total() == pytest.approx(sum(t.exposed().values()), abs=tol)  # one comm stream
    for name, x in t.exposed().items():
        s, e = t.task(name)
        assert -tol <= x <= e - s + tol
    assert t.idle_time() == pytest.approx(0.0, abs=tol)


def test_collective_time_is_the_alpha_beta_ring_formula():
    link = Link("test", 3e-6, 25e9)
    m, n = 64 * 2**20, 16
    assert collective_time("all_reduce", m, n, link) == pytest.approx(2 * (n - 1) * 3e-6 + 2 * (n - 1) / n * m / 25e9)
    assert collective_time("all_gather", m, n, link) == pytest.approx((n - 1) * 3e-6 + (n - 1) / n * m / 25e9)
    assert collective_time("reduce_scatter", m, n, "ib-ndr") == pytest.approx(
        (n - 1) * LINKS["ib-ndr"].alpha + (n - 1) / n * m / LINKS["ib-ndr"].bandwidth)
    assert collective_time("send_recv", m, 2, link) == pytest.approx(3e-6 + m / 25e9)
    assert collective_time("all_reduce", m, 1, link) == 0.0


def test_collective_time_on_a_cluster_matches_ringlabs_gradient_traffic_timing():
    from ringlab.calc import grad_comm_bytes
    from ringlab.topology.presets import get_cluster

    cluster = get_cluster("dgx-h100", nodes=2)
    n_params = 1 << 28
    want = grad_comm_bytes("ddp", n_params, cluster.world_size, "bf16").time_on_cluster(cluster)
    assert collective_time("all_reduce", 2 * n_params, cluster.world_size, cluster) == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("kwargs, error", [
    ({"collective": "all_reduce", "message_bytes": -1, "group_size": 4, "fabric": "ib-ndr"}, ValueError),
    ({"collective": "gossip", "message_bytes": 1, "group_size": 4, "fabric": "ib-ndr"}, ValueError),
    ({"collective": "all_reduce", "message_bytes": 1, "group_size": 0, "fabric": "ib-ndr"}, ValueError),
    ({"collective": "all_reduce", "message_bytes": 1, "group_size": 4, "fabric": "carrier-pigeon"}, ValueError),
    ({"collective": "all_reduce", "message_bytes": 1, "group_size": 4, "fabric": 3}, TypeError),
])
def test_collective_time_refuses_bad_input(kwargs, error):
    with pytest.raises(error):
        collective_time(**kwargs)


def _elementary(points, covered_by):
    """Sum of the elementary segments between sorted ``points`` whose midpoint ``covered_by`` accepts."""
    pts = sorted(set(points))
    return sum(b - a for a, b in zip(pts, pts[1:]) if covered_by((a + b) / 2))


@given(st.lists(st.tuples(st.sampled_from(["compute", "s1", "s2"]), st.integers(0, 9), st.integers(0, 30)),
                min_size=1, max_size=30))
def test_exposure_equals_a_segment_by_segment_count(spec):
    """Random tasks on a compute stream and two comm streams, each waiting on a random earlier task; exposure
    is recounted on the elementary segments between all start and end times (integer times: exact)."""
    tasks = []
    for i, (stream, dep, duration) in enumerate(spec):
        deps = (tasks[dep % i].name,) if i and dep < 5 else ()
        tasks.append(compute(f"T{i}", float(duration), deps) if stream == "compute"
                     else comm(f"T{i}", float(duration), deps, stream=stream))
    t = simulate(tasks)
    spans = {x.name: t.task(x.name) for x in tasks}
    points = [v for s, e in spans.values() for v in (s, e)]

    def computing(x):
        return any(s < x < e for n, (s, e) in spans.items() if not tasks[int(n[1:])].is_comm)

    for x in tasks:
        if x.is_comm:
            s, e = spans[x.name]
            assert t.exposed()[x.name] == _elementary(points, lambda m: s < m < e and not computing(m))
    any_comm = [spans[x.name] for x in tasks if x.is_comm]
    assert t.exposed_total() == _elementary(points, lambda m: any(s < m < e for s, e in any_comm) and not computing(m))
