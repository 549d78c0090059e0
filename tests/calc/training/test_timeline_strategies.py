"""DDP buckets, FSDP prefetch, TP on the critical path and PP send/recv, each against a hand derivation.

Notation for DDP (one rank, one compute stream, one NCCL stream): buckets go out in launch order
i = 1..k; c_i is the backward compute that produces bucket i (the backward of its layers), a_i its
all_reduce time. Bucket i is ready at r_i = F + c_1 + ... + c_i (F: the whole forward). Its all_reduce
starts at max(r_i, e_{i-1}) and ends at e_i. Write d_i = e_i - r_i, the lag of bucket i behind its
gradients. Then d_1 = a_1 and, since r_i - r_{i-1} = c_i,

    d_i = a_i + max(0, d_{i-1} - c_i).

Compute never waits in DDP, so it ends at r_k, and the exposed communication is e_k - r_k = d_k.
Equal buckets (c, a): d = a for all i when a <= c (only the last bucket shows), and
d_k = a + (k - 1)(a - c) when a > c (each bucket adds what the next one's compute cannot cover).
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringlab.calc.training.timeline import (
    MiB, LayerCost, TensorParallel, bucket_step, ddp_buckets, ddp_step, fsdp_step, model_layer_costs, pipeline_step,
)
from ringlab.collectives.cost import Link

N = 8
LINK = Link("test", 0.0, 50e9)  # no latency: all_reduce of M bytes takes 2 (N-1)/N M / 50e9 exactly


def ar(nbytes, n=N, bw=50e9):
    return 2 * (n - 1) / n * nbytes / bw


def ag(nbytes, n=N, bw=50e9):
    return (n - 1) / n * nbytes / bw


def uniform(layers, fwd, bwd, nbytes):
    return [LayerCost(f"l{i}", fwd, bwd, nbytes) for i in range(layers)]


# ---------------------------------------------------------------------------------------------- DDP

def test_buckets_follow_torch_ddp_first_1_mib_then_the_cap_in_reverse_layer_order():
    layers = uniform(8, 1, 1, 10 * MiB)
    # reverse order 7..0; the first bucket closes at >= 1 MiB (one layer), the rest at >= 25 MiB (3 layers)
    assert ddp_buckets(layers) == [[7], [6, 5, 4], [3, 2, 1], [0]]
    assert ddp_buckets(layers, first_bucket_mb=None) == [[7, 6, 5], [4, 3, 2], [1, 0]]
    assert ddp_buckets(layers, bucket_cap_mb=5, first_bucket_mb=None) == [[i] for i in reversed(range(8))]
    assert ddp_buckets(layers, bucket_cap_mb=1e6, first_bucket_mb=None) == [list(reversed(range(8)))]
    mixed = [LayerCost(name, 1, 1, mib * MiB) for name, mib in (("a", 0), ("b", 100), ("c", 0), ("d", 2))]
    assert ddp_buckets(mixed) == [[3], [2, 1], [0]]  # 'b' is larger than the cap: its bucket closes on it


def test_ddp_compute_bound_hides_every_bucket_but_the_last_exactly():
    layers = uniform(8, 1e-3, 2e-3, 40 * MiB)  # a = 1.468 ms < c = 2 ms
    t = ddp_step(layers, N, LINK, first_bucket_mb=None, bucket_cap_mb=40)
    exposed = t.exposed()
    assert len(exposed) == 8
    assert [exposed[f"bucket {i}"] for i in range(7)] == [0.0] * 7  # exactly zero, not approximately
    assert exposed["bucket 7"] == pytest.approx(ar(40 * MiB), rel=1e-12)
    assert t.exposed_total() == pytest.approx(ar(40 * MiB), rel=1e-12)
    assert t.step_time == pytest.approx(24e-3 + ar(40 * MiB), rel=1e-12)


@pytest.mark.parametrize("layers, fwd, bwd, mib", [(8, 1e-3, 2e-3, 100), (5, 0.0, 1e-4, 64), (3, 2e-3, 0.5e-3, 8)])
def test_ddp_comm_bound_exposes_a_plus_k_minus_1_times_a_minus_c(layers, fwd, bwd, mib):
    a, c = ar(mib * MiB), bwd
    t = ddp_step(uniform(layers, fwd, bwd, mib * MiB), N, LINK, first_bucket_mb=None, bucket_cap_mb=mib)
    want = a + (layers - 1) * max(0.0, a - c)
    assert t.exposed_total() == pytest.approx(want, rel=1e-12)
    assert t.step_time == pytest.approx(layers * (fwd + bwd) + want, rel=1e-12)


def test_ddp_one_bucket_exposes_the_whole_all_reduce():
    layers = uniform(8, 1e-3, 2e-3, 50 * MiB)
    t = ddp_step(layers, N, LINK, bucket_cap_mb=1e6, first_bucket_mb=None)
    assert t.exposed_total() == pytest.approx(ar(400 * MiB), rel=1e-12)


@given(st.lists(st.tuples(st.floats(0, 4e-3), st.floats(0, 4e-3), st.integers(0, 300)), min_size=1, max_size=20),
       st.sampled_from([1, 4, 25, 100]), st.sampled_from([None, 1]), st.floats(0, 1e-2))
def test_ddp_exposed_time_is_the_lag_recurrence_on_random_buckets(spec, cap, first, optimizer_s):
    layers = [LayerCost(f"l{i}", f, b, mib * MiB) for i, (f, b, mib) in enumerate(spec)]
    buckets = ddp_buckets(layers, cap, first)
    t = ddp_step(layers, N, LINK, bucket_cap_mb=cap, first_bucket_mb=first, optimizer_s=optimizer_s)
    d = 0.0
    for members in buckets:
        c = sum(layers[i].backward_s for i in members)
        a = ar(sum(layers[i].grad_bytes for i in members))
        d = a + max(0.0, d - c)
    compute = sum(f + b for f, b, _ in spec) + optimizer_s
    comm = sum(ar(sum(layers[i].grad_bytes for i in m)) for m in buckets)
    tol = 1e-9 * (compute + comm + 1e-3)
    assert t.exposed_total() == pytest.approx(d, abs=tol)
    assert t.step_time >= compute - tol and t.step_time >= t.comm_time(stream="dp") - tol
    assert t.comm_time(stream="dp") == pytest.approx(comm, abs=tol)
    assert t.exposed_total() == pytest.approx(t.step_time - t.compute_time(), abs=tol)
    assert t.compute_time() == pytest.approx(compute, abs=tol)
    assert t.exposed_total() == pytest.approx(sum(t.exposed().values()), abs=tol)  # one NCCL stream
    assert all(-tol <= x for x in t.exposed().values())


def test_many_small_buckets_beat_one_with_the_same_bytes_until_latency_bites():
    """Same bytes on the wire (alpha = 0) whatever the cap; with alpha > 0 tiny buckets pay 2(N-1) alphas each."""
    layers = uniform(32, 0.5e-3, 1e-3, 16 * MiB)
    one = ddp_step(layers, N, LINK, bucket_cap_mb=1e6, first_bucket_mb=None)
    small = ddp_step(layers, N, LINK, bucket_cap_mb=16, first_bucket_mb=None)
    assert small.bytes_sent() == one.bytes_sent() == 2 * (N - 1) * 32 * 16 * MiB // N
    assert small.step_time < one.step_time
    slow = Link("high latency", 200e-6, 50e9)  # 2(N-1) x 200 us = 2.8 ms per all_reduce
    per_layer = ddp_step(layers, N, slow, bucket_cap_mb=16, first_bucket_mb=None)
    mid = ddp_step(layers, N, slow, bucket_cap_mb=128, first_bucket_mb=None)
    whole = ddp_step(layers, N, slow, bucket_cap_mb=1e6, first_bucket_mb=None)
    assert mid.step_time < per_layer.step_time and mid.step_time < whole.step_time


def test_ddp_refuses_bad_buckets_and_sizes():
    layers = uniform(3, 1, 1, 1)
    with pytest.raises(ValueError, match="exactly once"):
        ddp_step(layers, N, LINK, buckets=[[2, 1]])
    with pytest.raises(ValueError, match="bucket_cap_mb"):
        ddp_buckets(layers, 0)
    with pytest.raises(TypeError, match="LayerCost"):
        ddp_step([], N, LINK)
    with pytest.raises(ValueError, match="backward_s"):
        LayerCost("x", 1.0, -1.0, 0)


# --------------------------------------------------------------------------------------------- FSDP

def test_fsdp_with_prefetch_exposes_only_the_first_gathers_and_the_last_reduce_scatter():
    """Units of f = 1 ms, b = 2 ms, gathers of g = 0.92 ms < f: everything hides but the forward's first
    all_gather, the backward's first all_gather (it waits for the forward to end) and the last reduce_scatter."""
    m = 50 * MiB
    t = fsdp_step(uniform(8, 1e-3, 2e-3, m), N, LINK)
    g = ag(m)
    assert t.exposed_total() == pytest.approx(3 * g, rel=1e-12)
    assert t.step_time == pytest.approx(24e-3 + 3 * g, rel=1e-12)
    exposed = t.exposed()
    assert [exposed[f"AGf{u}"] for u in range(1, 8)] == [0.0] * 7 and exposed["AGb7"] == pytest.approx(g)
    assert [exposed[f"RS{u}"] for u in range(1, 8)] == [0.0] * 7
    # prefetch is one unit ahead: unit u+1's gather waits for unit u-1's forward (two units unsharded at most),
    # and in backward unit u-1's gather waits for unit u+1's backward
    assert [t.task(f"AGf{u + 1}")[0] for u in range(1, 7)] == [t.task(f"F{u - 1}")[1] for u in range(1, 7)]
    two = fsdp_step(uniform(8, 1e-3, 2e-3, m), N, LINK, streams="two")
    assert [two.task(f"AGb{u - 1}")[0] for u in range(1, 7)] == [two.task(f"B{u + 1}")[1] for u in range(1, 7)]
    # on one stream it also queues behind unit u+1's reduce_scatter
    assert [t.task(f"AGb{u - 1}")[0] for u in range(1, 7)] == [t.task(f"RS{u + 1}")[1] for u in range(1, 7)]


@pytest.mark.parametrize("streams", ["one", "two"])
def test_fsdp_without_prefetch_waits_for_every_gather(streams):
    """Each unit's forward and backward wait for their own gather (2U of them); the reduce_scatters
    (r <= g) run behind the next gather or the next backward, but for the last."""
    m, u = 50 * MiB, 6
    t = fsdp_step(uniform(u, 1e-3, 2e-3, m), N, LINK, forward_prefetch=False, backward_prefetch=False, streams=streams)
    assert t.exposed_total() == pytest.approx(2 * u * ag(m) + ag(m), rel=1e-12)


def test_shard_grad_op_skips_the_backward_gathers():
    m = 50 * MiB
    t = fsdp_step(uniform(4, 1e-3, 2e-3, m), N, LINK, reshard_after_forward=False)
    assert sum(1 for x in t.tasks if x.collective == "all_gather") == 4
    assert t.exposed_total() == pytest.approx(2 * ag(m), rel=1e-12)  # first forward gather, last reduce_scatter
    assert t.bytes_sent() == 2 * 4 * (N - 1) * m // N


def test_more_bytes_can_be_faster_fsdp_with_prefetch_against_ddp_with_one_bucket():
    layers = uniform(8, 1e-3, 2e-3, 50 * MiB)
    ddp = ddp_step(layers, N, LINK, bucket_cap_mb=1e6, first_bucket_mb=None)
    fsdp = fsdp_step(layers, N, LINK)
    total = 8 * 50 * MiB
    assert ddp.bytes_sent() == 2 * (N - 1) * total // N
    assert fsdp.bytes_sent() == 3 * (N - 1) * total // N  # 1.5 x DDP (ZeRO paper sec. 7.2.2)
    assert fsdp.step_time < ddp.step_time
    assert ddp.exposed_total() == pytest.approx(ar(total))
    assert fsdp.exposed_total() == pytest.approx(3 * ag(50 * MiB))


@given(st.lists(st.tuples(st.floats(0, 3e-3), st.floats(0, 3e-3), st.integers(0, 200)), min_size=1, max_size=12),
       st.booleans(), st.booleans(), st.booleans(), st.sampled_from(["one", "two"]))
def test_fsdp_invariants(spec, fwd_pf, bwd_pf, reshard, streams):
    layers = [LayerCost(f"l{i}", f, b, mib * MiB) for i, (f, b, mib) in enumerate(spec)]
    t = fsdp_step(layers, N, LINK, forward_prefetch=fwd_pf, backward_prefetch=bwd_pf,
                  reshard_after_forward=reshard, streams=streams)
    compute = sum(f + b for f, b, _ in spec)
    tol = 1e-9 * (compute + t.comm_time() + 1e-3)
    assert t.compute_time() == pytest.approx(compute, abs=tol)
    assert t.exposed_total() == pytest.approx(t.step_time - compute, abs=tol)
    for stream in t.streams():
        assert t.step_time >= t.comm_time(stream=stream) - tol
    gathers = (2 if reshard else 1) * sum(ag(mib * MiB) for _, _, mib in spec)
    assert t.comm_time(stream="all_gather" if streams == "two" else "dp") >= gathers - tol
    # prefetching never makes the step slower
    lazy = fsdp_step(layers, N, LINK, forward_prefetch=False, backward_prefetch=False,
                     reshard_after_forward=reshard, streams=streams)
    assert t.step_time <= lazy.step_time + tol


def test_fsdp_units_group_layers_and_are_checked():
    layers = uniform(4, 1e-3, 2e-3, 10 * MiB)
    t = fsdp_step(layers, N, LINK, units=[[0, 1], [2, 3]])
    assert [x.message_bytes for x in t.tasks if x.name.startswith("AGf")] == [20 * MiB, 20 * MiB]
    for bad in ([[0, 2], [1, 3]], [[0, 1]], [[0, 1], [], [2, 3]]):
        with pytest.raises(ValueError, match="units must"):
            fsdp_step(layers, N, LINK, units=bad)
    with pytest.raises(ValueError, match="streams"):
        fsdp_step(layers, N, LINK, streams="three")


# ----------------------------------------------------------------------------------------------- TP

@pytest.mark.parametrize("sp", [False, True])
def test_tp_collectives_sit_on_the_critical_path(sp):
    """World size 1 (no DP traffic): step = compute + 4 TP points per layer, every one of them exposed."""
    layers = uniform(6, 1e-3, 2e-3, 10 * MiB)
    msg = 4096 * 8192 * 2
    tp = TensorParallel(8, msg, LINK, sequence_parallel=sp)
    t = ddp_step(layers, 1, LINK, tp=tp)
    point = 2 * ag(msg) if sp else ar(msg)  # reduce_scatter + all_gather move what one all_reduce does
    assert t.exposed_by_label().keys() == ({"tp reduce_scatter", "tp all_gather"} if sp else {"tp all_reduce"})
    assert t.exposed_total() == pytest.approx(6 * 4 * point, rel=1e-12)
    assert t.step_time == pytest.approx(18e-3 + 6 * 4 * point, rel=1e-12)
    assert t.compute_time() == pytest.approx(18e-3, rel=1e-12)


def test_tp_and_dp_streams_overlap_each_other():
    layers = uniform(6, 1e-3, 2e-3, 40 * MiB)
    tp = TensorParallel(8, 4096 * 8192 * 2, LINK)
    t = ddp_step(layers, N, LINK, tp=tp, bucket_cap_mb=40, first_bucket_mb=None)
    # the DP buckets run while compute waits on TP: per-task exposure counts that time for both
    assert sum(t.exposed().values()) > t.exposed_total()
    assert t.exposed_total() == pytest.approx(t.step_time - t.compute_time(), rel=1e-12)


# ----------------------------------------------------------------------------------------------- PP

@pytest.mark.parametrize("schedule, v", [("gpipe", 1), ("1f1b", 1), ("interleaved-1f1b", 2), ("zb-h1", 1)])
@pytest.mark.parametrize("p, m", [(1, 3), (4, 8), (3, 5)])
def test_pipeline_without_sends_reproduces_the_slot_grid(schedule, v, p, m):
    from ringlab.calc import pipeline_schedule

    if schedule == "interleaved-1f1b" and m % p:
        m = p * 2
    t = pipeline_step(p, m, schedule, 1, 2, 1, virtual_stages=v)
    grid = pipeline_schedule(p, m, schedule, v, 1, 2, 1)
    assert t.step_time == grid.makespan
    busy = (grid.kind != 0).sum(axis=0)
    for s in range(p):
        assert t.compute_time(s) == busy[s]
        assert t.idle_time(s) == grid.makespan - busy[s]


@pytest.mark.parametrize("p, m, c", [(4, 8, 0.25), (2, 3, 1.0), (5, 2, 0.5)])
def test_gpipe_with_sends_adds_two_sends_per_stage_boundary(p, m, c):
    """Stage s ends forward x at (x+1+s) t_f + s c; the backward mirrors it:
    step = (M + P - 1)(t_f + t_bwd) + 2 (P - 1) c when c <= t_f, t_bwd (sends never queue)."""
    link = Link("p2p", 0.0, 1e9)
    t = pipeline_step(p, m, "gpipe", 1.0, 1.5, 0.5, activation_bytes=int(c * 1e9), fabric=link)
    assert t.step_time == pytest.approx((m + p - 1) * (1.0 + 2.0) + 2 * (p - 1) * c)
    for s in range(p):
        assert t.compute_time(s) + t.exposed_total(s) + t.idle_time(s) == pytest.approx(t.step_time)
        assert t.idle_time(s) >= -1e-12
    sends = [m * int(c * 1e9) * (1 if s in (0, p - 1) else 2) for s in range(p)]  # the end stages send one way
    assert [t.bytes_sent(s) for s in range(p)] == sends


def test_pipeline_refuses_bad_schedules():
    with pytest.raises(ValueError, match="schedule"):
        pipeline_step(4, 8, "2f2b")
    with pytest.raises(ValueError, match="divisible"):
        pipeline_step(4, 6, "interleaved-1f1b", virtual_stages=2)


# ------------------------------------------------------------------------------------ model costs

def test_model_layer_costs_add_up_to_the_model():
    from ringlab.calc import get_hardware, get_model
    from ringlab.calc.training.flops import step_flops

    m = get_model("llama-3-8b")
    costs = model_layer_costs(m, 4096, 2, "h100-sxm", efficiency=0.5, tp=2)
    assert [c.name for c in costs[:2]] + [costs[-1].name] == ["embed", "layer 0", "lm_head"]
    assert len(costs) == m.num_hidden_layers + 2
    assert sum(c.grad_bytes for c in costs) == pytest.approx(2 * m.param_count() / 2, abs=len(costs))
    rate = get_hardware("h100-sxm").tflops_bf16 * 1e12 * 0.5 * 2
    assert sum(c.forward_s for c in costs) * rate == pytest.approx(step_flops(m, 4096, 2).forward, rel=1e-12)
    assert sum(c.backward_s for c in costs) == pytest.approx(2 * sum(c.forward_s for c in costs), rel=1e-12)
    assert costs[0].grad_bytes == m.vocab_size * m.hidden_size * 2 // 2  # untied: embed holds its own matrix
    with pytest.raises(ValueError, match="efficiency"):
        model_layer_costs(m, 4096, efficiency=1.5)


def test_bucket_step_is_ddp_step_reduced_to_its_buckets():
    layers = [LayerCost(f"l{i}", 1e-3 * (i % 3), 1e-3 * (1 + i % 2), (5 + 7 * i) * MiB) for i in range(10)]
    buckets = ddp_buckets(layers, 20)
    full = ddp_step(layers, N, LINK, bucket_cap_mb=20)
    reduced = bucket_step([sum(layers[i].backward_s for i in b) for b in buckets],
                          [ar(sum(layers[i].grad_bytes for i in b)) for b in buckets],
                          sum(x.forward_s for x in layers))
    assert reduced.step_time == pytest.approx(full.step_time, rel=1e-12)
    assert reduced.exposed_total() == pytest.approx(full.exposed_total(), rel=1e-12)
    with pytest.raises(ValueError, match="one entry per bucket"):
        bucket_step([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"allreduce_s\[0\]"):
        bucket_step([1.0], [-1.0])


def test_pipeline_with_data_parallel_all_reduce_hides_in_the_cool_down_but_on_stage_0():
    """GPipe without sends: stage s ends its last backward (P - 1 - s) t_bwd before stage 0 does, and starts
    its all_reduce then. So the step grows by exactly r (stage 0's all_reduce) while r <= t_bwd."""
    p, m, grad = 4, 6, 64 * 2**20
    base = pipeline_step(p, m, "gpipe", 1.0, 1.5, 0.5)
    r = ar(grad, n=8)
    t = pipeline_step(p, m, "gpipe", 1.0, 1.5, 0.5, dp_size=8, stage_grad_bytes=grad, dp_fabric=LINK)
    assert t.step_time == pytest.approx(base.step_time + r)
    for s in range(p):
        start, end = t.task(f"s{s} dp all_reduce")
        assert start == base.task(f"s{s} B{m - 1}")[1] and end == pytest.approx(start + r)
        assert t.bytes_sent(s) == 2 * 7 * grad // 8
    assert t.exposed_total(0) == pytest.approx(r)
