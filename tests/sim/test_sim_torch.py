"""The simulator on torch tensors gives the same numbers as on numpy arrays (values bit for bit, traffic)."""

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import ringlab
from ringlab.collectives import ALGORITHMS, Schedule, Transfer, chunk_sizes, ring_all_reduce_bytes
from ringlab.sim import run_schedule

torch = pytest.importorskip("torch")

# The CUDA cases are always collected: on a machine without a CUDA device they are reported as skipped, not dropped.
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                                reason="no CUDA device: the torch backend's GPU cases"))]
DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "int32", "int64", "uint8"]
INT_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _tensor(n, numel, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.startswith(("int", "uint")):
        info = torch.iinfo(getattr(torch, dtype))
        return torch.randint(info.min, info.max, (n, numel), generator=g, dtype=getattr(torch, dtype))
    return torch.randn(n, numel, generator=g, dtype=torch.float64).to(getattr(torch, dtype))


def _as_numpy(t):
    """Same bits as a numpy array (bfloat16 through ml_dtypes)."""
    t = t.cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _bits(a):
    """Raw bits of an array or tensor as an integer numpy array, to compare floats exactly (NaN included)."""
    a = _as_numpy(a) if isinstance(a, torch.Tensor) else np.asarray(a)
    return a.view(f"u{a.itemsize}")


def _same(res_t, res_n):
    assert isinstance(res_t.outputs, torch.Tensor)
    assert (_bits(res_t.outputs) == _bits(res_n.outputs)).all()
    for name in ("bytes_sent", "bytes_received", "per_step_sent", "per_step_received"):
        got, want = getattr(res_t.traffic, name), getattr(res_n.traffic, name)
        assert isinstance(got, np.ndarray) and got.dtype == np.int64
        assert got.tolist() == want.tolist()
    assert res_t.traffic.steps == res_n.traffic.steps


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_all_reduce_matches_numpy_bit_for_bit(device, dtype, n):
    ops = ["sum", "max", "min", "prod"] + (["avg"] if dtype.startswith("float") or dtype == "bfloat16" else [])
    for numel in sorted({0, 1, max(n - 1, 0), n + 1, 37}):
        x = _tensor(n, numel, dtype, seed=n * 100 + numel).to(device)
        for op in ops:
            res_t = ringlab.ring_allreduce(x, op=op)
            assert res_t.outputs.device.type == device and res_t.outputs.dtype == x.dtype
            _same(res_t, ringlab.ring_allreduce(_as_numpy(x), op=op))


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint8"])
def test_integer_sum_equals_direct_sum_with_wraparound(dtype):
    x = _tensor(6, 50, dtype, seed=3)
    expected = np.sum(x.numpy(), axis=0, dtype=x.numpy().dtype)  # modular, like NCCL
    res = ringlab.ring_allreduce(x)
    assert (res.outputs.numpy() == expected).all()
    assert res.traffic.bytes_sent.tolist() == ring_all_reduce_bytes(6, 50, x.element_size()).tolist()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n, numel", [(1, 4), (4, 8), (4, 10), (5, 3), (7, 0)])
def test_reduce_scatter_and_all_gather_match_numpy(device, n, numel):
    x = _tensor(n, numel, "float32", seed=numel).to(device)
    rs_t, rs_n = ringlab.reduce_scatter(x), ringlab.reduce_scatter(x.cpu().numpy())
    parts_t = list(rs_t.outputs)
    assert all(isinstance(p, torch.Tensor) and p.device.type == device for p in parts_t)
    assert [_bits(p).tolist() for p in parts_t] == [_bits(p).tolist() for p in rs_n.outputs]
    assert rs_t.traffic.bytes_sent.tolist() == rs_n.traffic.bytes_sent.tolist()
    ag_t, ag_n = ringlab.all_gather(parts_t), ringlab.all_gather([np.asarray(p) for p in rs_n.outputs])
    _same(ag_t, ag_n)


def _mirror(n):
    """Rank r adds its chunk r into rank n-1-r's copy: the (rank, chunk) runs have rank falling as chunk rises."""
    step = tuple(Transfer(r, n - 1 - r, r, True) for r in range(n) if r != n - 1 - r)
    every = tuple(range(n))
    return Schedule("all_reduce", "mirror", n, n, (step,), (every,) * n, (every,) * n)


def _scrambled(n):
    """One step whose (rank, chunk) pairs follow no stride: rank r adds chunk (r*r) % n into rank (3r+1) % n."""
    step = tuple(Transfer(r, (3 * r + 1) % n, (r * r) % n, True) for r in range(n) if (3 * r + 1) % n != r)
    every = tuple(range(n))
    return Schedule("all_reduce", "scrambled", n, n, (step,), (every,) * n, (every,) * n)


def _direct(n):
    """Every rank sends every chunk to every other rank at once: reads and writes overlap within the step."""
    step = tuple(Transfer(s, d, c, True) for s in range(n) for d in range(n) for c in range(n) if s != d)
    every = tuple(range(n))
    return Schedule("all_reduce", "direct", n, n, (step,), (every,) * n, (every,) * n)


@pytest.mark.parametrize("device", DEVICES)
def test_rank_falling_as_chunk_rises_matches_numpy_and_hand_result(device):
    n, numel = 6, 6 * 5 + 2
    x = _tensor(n, numel, "float32", seed=7).to(device)
    res_t = run_schedule(_mirror(n), x)
    _same(res_t, run_schedule(_mirror(n), x.cpu().numpy()))
    xs = x.cpu().numpy()
    bounds = [0] + np.cumsum([len(c) for c in np.array_split(np.arange(numel), n)]).tolist()
    expected = xs.copy()
    for r in range(n):
        d, lo, hi = n - 1 - r, bounds[r], bounds[r + 1]
        expected[d, lo:hi] = xs[d, lo:hi] + xs[r, lo:hi]
    assert (res_t.outputs.cpu().numpy() == expected).all()


@pytest.mark.parametrize("device", DEVICES)
def test_overlapping_step_with_repeated_receivers_matches_numpy(device):
    n, numel = 4, 11
    xs = _tensor(31, 93, "float32", seed=3).to(device)
    _same(run_schedule(_scrambled(31), xs), run_schedule(_scrambled(31), xs.cpu().numpy()))
    x = _tensor(n, numel, "int64", seed=5).to(device) // 4
    res_t = run_schedule(_direct(n), x)
    _same(res_t, run_schedule(_direct(n), x.cpu().numpy()))
    assert (res_t.outputs.cpu() == x.cpu().sum(0)).all()
    xf = _tensor(n, numel, "bfloat16", seed=6).to(device)
    _same(run_schedule(_direct(n), xf), run_schedule(_direct(n), _as_numpy(xf)))


def test_strided_broadcast_and_grad_inputs_work_and_are_left_untouched():
    base = torch.randn(37)
    expanded = base.expand(5, 37)  # row stride 0
    res = ringlab.ring_allreduce(expanded)
    _same(res, ringlab.ring_allreduce(np.broadcast_to(base.numpy(), (5, 37))))
    x = torch.randn(4, 3, 8, requires_grad=True)
    before = x.detach().clone()
    out = ringlab.ring_allreduce(x[:, :, ::2]).outputs  # non-contiguous view
    assert out.shape == (4, 3, 4) and not out.requires_grad
    assert torch.equal(x.detach(), before)
    assert torch.allclose(out[2], x.detach()[:, :, ::2].sum(0), atol=1e-5)


def test_list_of_tensors_and_trace():
    parts = [torch.full((3, 2), float(r)) for r in range(4)]
    res = ringlab.ring_allreduce(parts, trace=True)
    assert (res.outputs == 6.0).all()
    res_n = ringlab.ring_allreduce([p.numpy() for p in parts], trace=True)
    for name in ("step", "src", "dst", "chunk", "nbytes"):
        assert getattr(res.events, name).tolist() == getattr(res_n.events, name).tolist()


@pytest.mark.parametrize(
    "inputs, exc, match",
    [
        (torch.ones(3, 4, dtype=torch.uint16), TypeError, "not supported for tensors"),
        (torch.ones(3, 4, dtype=torch.bool), TypeError, "not supported for tensors"),
        ([torch.ones(3), np.ones(3)], TypeError, "mix of torch tensors"),
        ([torch.ones(3), torch.ones(3, dtype=torch.float64)], TypeError, "rank 1 has dtype"),
        ([torch.ones(3), torch.ones(4)], ValueError, "rank 1 has shape"),
        (torch.tensor(1.0), ValueError, "world_size axis"),
    ],
)
def test_bad_tensor_input_gets_a_clear_error(inputs, exc, match):
    with pytest.raises(exc, match=match):
        ringlab.ring_allreduce(inputs)


def test_avg_on_integer_tensor_is_refused():
    with pytest.raises(TypeError, match="avg"):
        ringlab.ring_allreduce(torch.ones(2, 2, dtype=torch.int32), op="avg")


def test_numpy_input_does_not_import_torch():
    code = ("import sys, numpy as np, ringlab; ringlab.ring_allreduce(np.ones((3, 5))); "
            "ringlab.reduce_scatter(np.ones((3, 5))); assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("collective, algorithm", sorted(ALGORITHMS))
def test_every_collective_runs_on_tensors_as_on_numpy(device, collective, algorithm):
    """run_collective takes tensors too (it once crashed on ``x[0].size``, a method on tensors)."""
    from ringlab.sim.runner import run_collective

    n, numel = 5, 23
    x = _tensor(n, numel, "float32", seed=11).to(device)
    root = 2 if ALGORITHMS[(collective, algorithm)].rooted else 0
    inputs_t = list(x[0].split(chunk_sizes(numel, n).tolist())) if collective == "all_gather" else x
    inputs_n = [np.asarray(p.cpu()) for p in inputs_t] if collective == "all_gather" else x.cpu().numpy()
    op = "avg" if collective in ("all_reduce", "reduce_scatter", "reduce") else "sum"
    got = run_collective(collective, algorithm, inputs_t, op=op, root=root)
    want = run_collective(collective, algorithm, inputs_n, op=op, root=root)
    flat = (lambda outs: np.concatenate([np.asarray(o.cpu() if hasattr(o, "cpu") else o).reshape(-1) for o in outs]))
    assert np.array_equal(flat(got.outputs).view(np.uint32), flat(want.outputs).view(np.uint32))
    assert np.array_equal(got.traffic.bytes_sent, want.traffic.bytes_sent)
