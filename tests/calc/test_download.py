"""The download model (ringlab.calc.download) against closed forms worked out by hand."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringlab.calc.download import (
    LLAMA3_405B_BYTES,
    Caps,
    Fault,
    checkpoint_distribution,
    simulate_fetch,
    steady_throughput,
)

MB, GB = 1e6, 1e9


def test_steady_throughput_is_the_tightest_cap():
    conn_only = Caps(per_connection=100 * MB)
    assert [steady_throughput(k, conn_only) for k in (1, 4, 64)] == [100 * MB, 400 * MB, 6400 * MB]
    both = Caps(per_connection=100 * MB, link=1 * GB)
    assert steady_throughput(9, both) == pytest.approx(900 * MB)
    assert steady_throughput(10, both) == pytest.approx(1 * GB) and both.binding(10) in ("per_connection", "link")
    assert steady_throughput(40, both) == pytest.approx(1 * GB) and both.binding(40) == "link"
    server = Caps(per_connection=250 * MB, server_streams=6, server_bandwidth=900 * MB)
    assert steady_throughput(4, server) == pytest.approx(900 * MB)  # 4 x 250 MB/s = 1 GB/s > the server's 0.9
    assert steady_throughput(12, server) == pytest.approx(900 * MB * 6 / 12) and server.binding(12) == "server"


@given(shards=st.integers(1, 40), k=st.integers(1, 16), gb=st.sampled_from([1, 2, 5]))
def test_connection_bound_download_takes_whole_waves(shards, k, gb):
    # no link cap: every shard runs at the per-connection rate, ceil(N/K) waves of S / c each
    sched = simulate_fetch([gb * GB] * shards, k, Caps(per_connection=100 * MB))
    assert sched.finished == pytest.approx(math.ceil(shards / k) * gb * GB / (100 * MB))
    assert sched.peak_slots() == min(k, shards)
    assert [a.outcome for a in sched.attempts] == ["done"] * shards


@given(waves=st.integers(1, 5), k=st.integers(1, 16))
def test_link_bound_download_runs_at_the_link(waves, k):
    # one stream could take the whole link: with K | N the link stays full, N S / L
    sched = simulate_fetch([3 * GB] * (waves * k), k, Caps(link=1.25 * GB))
    assert sched.finished == pytest.approx(waves * k * 3 * GB / (1.25 * GB))
    assert sched.throughput() == pytest.approx(1.25 * GB)


def test_the_last_partial_wave_runs_below_the_link():
    # card 19: 64 shards of 5 GB, 100 MB/s per connection, 25 Gb/s: K = 48 shares the link (5 GB x 48 / 3.125 GB/s
    # = 76.8 s), then 16 streams of 100 MB/s (1.6 GB/s, below the link) take 50 s more
    caps = Caps(per_connection=100 * MB, link=25e9 / 8)
    assert simulate_fetch([5 * GB] * 64, 48, caps).finished == pytest.approx(76.8 + 50)
    assert simulate_fetch([5 * GB] * 64, 32, caps).finished == pytest.approx(320 / 3.125)
    assert simulate_fetch([5 * GB] * 64, 8, caps).finished == pytest.approx(400)


def test_a_503_waits_its_retry_after_without_holding_a_slot():
    # one slot, two shards of 1 s each: shard 0's 503 (after 0.1 s of latency) frees the slot for shard 1,
    # which runs 0.1 + 1 s; shard 0 is back in the queue at 0.1 + 2 s (Retry-After beats the 0.5 s backoff)
    sched = simulate_fetch([100 * MB] * 2, 1, Caps(per_connection=100 * MB), {0: (Fault("503", retry_after=2.0),)},
                           latency=0.1, backoff=0.5)
    got = [(a.shard, a.outcome, round(a.start, 9), round(a.end, 9)) for a in sched.attempts]
    assert got == [(0, "503", 0.0, 0.1), (1, "done", 0.1, 1.2), (0, "done", 2.1, 3.2)]


def test_a_reset_resumes_with_the_bytes_left_after_the_backoff():
    sched = simulate_fetch([100 * MB], 1, Caps(per_connection=100 * MB), {0: (Fault("reset", fraction=0.25),)},
                           backoff=0.5)
    first, second = sched.attempts
    assert (first.outcome, first.bytes, first.end) == ("reset", pytest.approx(25 * MB), pytest.approx(0.25))
    assert second.start == pytest.approx(0.75) and second.bytes == pytest.approx(75 * MB)  # resumed, not from 0
    assert sched.finished == pytest.approx(1.5)


def test_backoff_doubles_per_retry():
    faults = {0: (Fault("reset", fraction=0.5), Fault("reset", fraction=0.5))}
    sched = simulate_fetch([100 * MB], 1, Caps(per_connection=100 * MB), faults, backoff=1.0)
    starts = [a.start for a in sched.attempts]
    ends = [a.end for a in sched.attempts]
    assert [s - e for s, e in zip(starts[1:], ends)] == [pytest.approx(1.0), pytest.approx(2.0)]


def test_the_deadline_cancels_everything_in_flight():
    sched = simulate_fetch([1 * GB] * 8, 4, Caps(per_connection=100 * MB), deadline=15.0)
    assert not sched.complete and sched.cancelled_at == 15.0
    cancelled = [a for a in sched.attempts if a.outcome == "cancelled"]
    assert len(cancelled) == 4 and all(a.end == 15.0 and a.bytes == pytest.approx(500 * MB) for a in cancelled)
    with pytest.raises(ValueError, match="cancelled"):
        sched.throughput()


@pytest.mark.parametrize("call, match", [
    (lambda: Caps(), "at least one"),
    (lambda: Caps(server_streams=4), "together"),
    (lambda: Caps(link=-1), "link"),
    (lambda: simulate_fetch([], 2, Caps(link=1)), "at least one shard"),
    (lambda: simulate_fetch([1], 0, Caps(link=1)), "concurrency"),
    (lambda: simulate_fetch([1], 1, Caps(link=1), {3: ()}), "shard index"),
    (lambda: Fault("404"), "fault kind"),
    (lambda: checkpoint_distribution(nodes=1000, nodes_per_replica=16), "multiple"),
    (lambda: checkpoint_distribution(topology="pcie-8gpu"), "fewer NICs"),
])
def test_bad_input_is_refused_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_checkpoint_distribution_by_hand():
    d = checkpoint_distribution()  # 810 GB, 1,024 nodes, 16 per replica, 100 GB/s storage, 50 GB/s per node
    assert LLAMA3_405B_BYTES == 810e9
    assert d.replicas == 64 and d.bytes_per_node == pytest.approx(810e9 / 16)
    assert d.direct_s == pytest.approx(64 * 810e9 / 100e9)  # 518.4 s: storage-bound
    assert d.read_once_s == pytest.approx(8.1)
    # scatter + all-gather broadcast over 64 ranks on one 400 Gb/s NIC with 5 us per step (Thakur et al.):
    # (log2 64 + 63) alpha + 2 x 63/64 x M / 50 GB/s, M = 810e9 / 16 / 8 per GPU
    per_gpu = int(810e9 / 16 / 8)
    assert d.broadcast_s == pytest.approx((6 + 63) * 5e-6 + 2 * 63 / 64 * per_gpu / 50e9, rel=1e-6)
    assert d.staged_s == pytest.approx(d.read_once_s + d.broadcast_s) and d.speedup > 60
    one = checkpoint_distribution(nodes=16)  # a single replica: nothing to broadcast
    assert one.broadcast_s == 0.0 and one.direct_s == one.read_once_s
