"""Fused LayerNorm (ringlab.labs.layernorm) against torch and float64, and its numpy reference.

Without a CUDA device the kernel runs in Triton's interpreter on CPU tensors; with one, the
same tests run the compiled kernel on CUDA tensors.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringlab.labs.layernorm_ref import layer_norm_reference

try:
    import torch
except ImportError:  # the numpy reference tests below still run
    torch = None

DS = [1, 7, 127, 128, 1000, 4096, 5000]
NS = [1, 3, 64]


def float64_layer_norm(x, weight=None, bias=None, eps=1e-5):
    """Two-pass LayerNorm in float64: mean, then the mean of squared deviations."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    var = np.square(x - mean).mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    y = (x - mean) * rstd
    if weight is not None:
        y = y * np.asarray(weight, dtype=np.float64)
    if bias is not None:
        y = y + np.asarray(bias, dtype=np.float64)
    return y, mean.reshape(-1), rstd.reshape(-1)


# ---------------------------------------------------------------- numpy reference (no triton)

@given(
    n=st.integers(1, 6),
    d=st.integers(1, 300),
    block_d=st.sampled_from([1, 3, 64, 1024]),
    offset=st.sampled_from([0.0, 100.0]),
    affine=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_reference_matches_float64_two_pass(n, d, block_d, offset, affine, seed):
    rng = np.random.default_rng(seed)
    x = (offset + rng.standard_normal((n, d))).astype(np.float32)
    weight = rng.standard_normal(d).astype(np.float32) if affine else None
    bias = rng.standard_normal(d).astype(np.float32) if affine else None
    out = layer_norm_reference(x, weight, bias, 1e-5, block_d=block_d)
    y64, mean64, rstd64 = float64_layer_norm(x, weight, bias)
    assert out.y.dtype == np.float32 and out.mean.dtype == np.float32 and out.rstd.dtype == np.float32
    assert out.mean.shape == out.rstd.shape == (n,)
    # Worst-case fp32 forward-error bound: the mean picks up a few rounding errors of size
    # unit * max|x| per merge step and per level of a block's pairwise sum; a deviation x - mean
    # inherits them, scaled by cond = max|x| * rstd (large for offset 100) and by |weight|.
    unit = 2.0**-24
    k = 16 + 2 * (-(-d // block_d) + int(np.ceil(np.log2(min(d, block_d)))))
    max_abs = np.abs(x).max(axis=1)
    cond = max_abs * rstd64
    scale = 1 + (np.abs(weight).max() if affine else 0)
    assert np.all(np.abs(out.mean - mean64) <= 1e-6 + k * unit * max_abs)
    assert np.all(np.abs(out.rstd / rstd64 - 1) <= 1e-5 + k * unit * cond)
    assert np.all(np.abs(out.y - y64) <= 1e-5 + k * unit * (cond * scale)[:, None])


def test_reference_keeps_leading_dims_and_rounds_bfloat16():
    rng = np.random.default_rng(1)
    x32 = rng.standard_normal((2, 3, 40)).astype(np.float32)
    x16 = x32.astype(ml_dtypes.bfloat16)
    out = layer_norm_reference(x16)
    assert out.y.shape == (2, 3, 40) and out.y.dtype == x16.dtype and out.mean.shape == (6,)
    # Same float32 computation as on the widened input, then one round-to-nearest at the end.
    expected = layer_norm_reference(x16.astype(np.float32)).y.astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(out.y.view(np.uint16), expected.view(np.uint16))


def test_reference_constant_row_gives_bias():
    out = layer_norm_reference(np.full((2, 9), 3.5, np.float32), bias=np.arange(9, dtype=np.float32))
    np.testing.assert_array_equal(out.mean, [3.5, 3.5])
    np.testing.assert_allclose(out.rstd, 1 / np.sqrt(np.float32(1e-5)), rtol=1e-6)
    np.testing.assert_array_equal(out.y, np.tile(np.arange(9, dtype=np.float32), (2, 1)))


@pytest.mark.parametrize("kwargs, error, name", [
    (dict(x=np.arange(6).reshape(2, 3)), TypeError, "x"),
    (dict(x=np.float32(1.0)), ValueError, "x"),
    (dict(x=np.zeros((3, 0), np.float32)), ValueError, "x"),
    (dict(x=np.zeros((3, 4), np.float32), weight=np.ones(5, np.float32)), ValueError, "weight"),
    (dict(x=np.zeros((3, 4), np.float32), bias=np.ones((1, 4), np.float32)), ValueError, "bias"),
    (dict(x=np.zeros((3, 4), np.float32), weight=np.ones(4, np.int64)), TypeError, "weight"),
    (dict(x=np.zeros((3, 4), np.float32), eps=-1.0), ValueError, "eps"),
    (dict(x=np.zeros((3, 4), np.float32), eps=float("inf")), ValueError, "eps"),
    (dict(x=np.zeros((3, 4), np.float32), eps="1e-5"), TypeError, "eps"),
    (dict(x=np.zeros((3, 4), np.float32), block_d=0), ValueError, "block_d"),
    (dict(x=np.zeros((3, 4), np.float32), block_d=2.0), TypeError, "block_d"),
])
def test_reference_rejects_bad_input(kwargs, error, name):
    with pytest.raises(error, match=name):
        layer_norm_reference(**kwargs)


@pytest.mark.slow  # fresh interpreters importing torch
def test_plain_imports_load_neither_torch_nor_triton_and_layernorm_sets_interpreter():
    """In a fresh process without a GPU: light imports stay light; the kernel module picks the interpreter."""
    code = (
        "import sys, os\n"
        "import ringlab, ringlab.labs, ringlab.labs.layernorm_ref\n"
        "print(sorted(m for m in ('torch', 'triton') if m in sys.modules))\n"
        "from ringlab.labs import layernorm\n"
        "print(os.environ.get('TRITON_INTERPRET'), layernorm.INTERPRET)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    if importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None:
        code = code.split("from ringlab.labs import layernorm")[0]
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "[]"
    if len(lines) > 1:
        assert lines[1] == "1 True"


# ---------------------------------------------------------------- Triton kernel

@pytest.fixture(scope="module")
def ln():
    if torch is None:
        pytest.skip("torch is not installed: pip install 'ringlab[torch]'")
    # importorskip("triton") would import triton before the module can set TRITON_INTERPRET.
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed: pip install 'ringlab[triton]'")
    from ringlab.labs import layernorm

    return layernorm


@pytest.fixture(scope="module")
def device(ln):
    return "cpu" if ln.INTERPRET else "cuda"


def make_inputs(n, d, dtype, device, affine=(True, True), seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=gen).to(device=device, dtype=dtype)
    weight = torch.randn(d, generator=gen).to(device=device, dtype=dtype) if affine[0] else None
    bias = torch.randn(d, generator=gen).to(device=device, dtype=dtype) if affine[1] else None
    return x, weight, bias


def assert_stats(out, x, eps=1e-5):
    var, mean = torch.var_mean(x.double().reshape(-1, x.shape[-1]), dim=-1, unbiased=False)
    assert out.mean.dtype == out.rstd.dtype == torch.float32
    assert out.mean.shape == out.rstd.shape == mean.shape
    torch.testing.assert_close(out.mean.double(), mean, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out.rstd.double(), 1 / torch.sqrt(var + eps), rtol=1e-5, atol=0)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("affine", [(False, False), (True, True)], ids=["plain", "affine"])
@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("d", DS)
def test_matches_torch(ln, device, d, n, affine, dtype):
    dtype = getattr(torch, dtype)
    x, weight, bias = make_inputs(n, d, dtype, device, affine, seed=d * 100 + n)
    out = ln.layer_norm(x, weight, bias)
    ref = torch.nn.functional.layer_norm(x, (d,), weight, bias, 1e-5)
    assert out.y.dtype == dtype and out.y.shape == x.shape
    err = (out.y.double() - ref.double()).abs()
    if dtype == torch.float32:
        assert err.max().item() <= 1e-5
    else:
        # 2e-3 absolute, scaled by |y| above 1: one fp16 ulp is 2**-8 = 3.9e-3 for |y| in [4, 8),
        # so a rounding tie broken differently from torch would otherwise fail a correct kernel.
        assert (err / ref.double().abs().clamp(min=1)).max().item() <= 2e-3
    assert_stats(out, x)


@pytest.mark.parametrize("affine", [(True, False), (False, True)], ids=["weight", "bias"])
def test_weight_or_bias_alone(ln, device, affine):
    x, weight, bias = make_inputs(3, 127, torch.float32, device, affine)
    out = ln.layer_norm(x, weight, bias)
    torch.testing.assert_close(out.y, torch.nn.functional.layer_norm(x, (127,), weight, bias, 1e-5), rtol=0, atol=1e-5)


@pytest.mark.parametrize("n, d, block_rows, block_d", [
    (3, 7, 1, 1), (3, 7, 4, 2), (3, 7, 2, 8),  # Welford's one-column steps; one partial block
    (37, 127, 8, 16), (37, 127, 2, 64), (37, 127, 64, 128),
    (5, 1000, 2, 64), (5, 1000, 1, 256), (5, 1000, 8, 1024),
])
def test_any_tile_shape_gives_the_same_answer(ln, device, n, d, block_rows, block_d):
    """Partial row blocks, partial last column blocks and the multi-block merge, against torch and the reference."""
    x, weight, bias = make_inputs(n, d, torch.float32, device, seed=n + d)
    out = ln.layer_norm(x, weight, bias, eps=1e-3, block_rows=block_rows, block_d=block_d)
    torch.testing.assert_close(out.y, torch.nn.functional.layer_norm(x, (d,), weight, bias, 1e-3), rtol=0, atol=1e-5)
    assert_stats(out, x, eps=1e-3)
    ref = layer_norm_reference(x.cpu().numpy(), weight.cpu().numpy(), bias.cpu().numpy(), 1e-3, block_d=block_d)
    np.testing.assert_allclose(out.mean.cpu().numpy(), ref.mean, rtol=0, atol=1e-6)
    np.testing.assert_allclose(out.rstd.cpu().numpy(), ref.rstd, rtol=2e-6)


def test_large_mean_small_variance_is_stable(ln, device):
    """Rows around 1000 with unit spread: sum(x^2)/D - mean^2 in fp32 would lose most of the variance."""
    gen = torch.Generator().manual_seed(7)
    x = (1000 + torch.randn(4, 5000, generator=gen)).to(device)
    out = ln.layer_norm(x, block_d=1024)
    assert_stats(out, x)
    naive_var = (x.double() ** 2).float().mean(dim=1) - x.mean(dim=1) ** 2
    var = x.double().var(dim=1, unbiased=False)
    # The test would not show anything if the naive formula happened to be accurate here.
    assert ((naive_var.double() - var).abs() / var).max().item() > 1e-2


def test_leading_dims_are_flattened(ln, device):
    x, weight, bias = make_inputs(30, 33, torch.float32, device)
    x = x.reshape(2, 3, 5, 33)
    out = ln.layer_norm(x, weight, bias)
    assert out.y.shape == (2, 3, 5, 33) and out.mean.shape == out.rstd.shape == (30,)
    torch.testing.assert_close(out.y, torch.nn.functional.layer_norm(x, (33,), weight, bias, 1e-5), rtol=0, atol=1e-5)


@pytest.mark.parametrize("view", ["rows_strided", "transposed", "columns_strided"])
def test_non_contiguous_input(ln, device, view):
    base, weight, bias = make_inputs(40, 130, torch.float32, device)
    x = {"rows_strided": base[::3], "transposed": base.t()[:65].t(), "columns_strided": base[:, ::2]}[view]
    assert not x.is_contiguous()
    d = x.shape[-1]
    out = ln.layer_norm(x, weight[:d], bias[:d])
    torch.testing.assert_close(out.y, torch.nn.functional.layer_norm(x, (d,), weight[:d], bias[:d], 1e-5), rtol=0, atol=1e-5)
    assert_stats(out, x)


def test_empty_batch(ln, device):
    out = ln.layer_norm(torch.empty(0, 8, device=device))
    assert out.y.shape == (0, 8) and out.mean.shape == out.rstd.shape == (0,)


@pytest.mark.parametrize("d", [7, 5000])
def test_bfloat16_is_rounded_to_nearest(ln, device, d):
    """bf16 output = the fp32 kernel's output on the same values, rounded to nearest even once.

    Triton's interpreter truncates fp32 -> bf16 (about half the outputs one ulp low), so under
    the interpreter the module stores fp32 and lets torch round; this test fails if that goes.
    """
    x, weight, bias = make_inputs(64, d, torch.bfloat16, device)
    out = ln.layer_norm(x, weight, bias, block_d=1024)
    assert out.y.dtype == torch.bfloat16
    wide = ln.layer_norm(x.float(), weight.float(), bias.float(), block_d=1024)
    if ln.INTERPRET:
        assert torch.equal(out.y, wide.y.to(torch.bfloat16))
        assert torch.equal(out.mean, wide.mean) and torch.equal(out.rstd, wide.rstd)
    else:  # compiled code may contract ops differently per dtype: allow one bf16 ulp
        torch.testing.assert_close(out.y, wide.y.to(torch.bfloat16), rtol=2**-7, atol=2**-7)
    ref = torch.nn.functional.layer_norm(x, (d,), weight, bias, 1e-5)
    assert ((out.y.double() - ref.double()).abs() / ref.double().abs().clamp(min=1)).max().item() <= 2**-7


def _bad_calls(device):
    x = torch.zeros(3, 4, device=device)
    return [
        (dict(x=np.zeros((3, 4), np.float32)), TypeError, "x"),
        (dict(x=torch.tensor(1.0, device=device)), ValueError, "x"),
        (dict(x=torch.zeros(3, 0, device=device)), ValueError, "x"),
        (dict(x=x.to(torch.int32)), TypeError, "x"),
        (dict(x=x.double()), TypeError, "x"),
        (dict(x=torch.zeros(3, 4, device="meta")), ValueError, "x"),
        (dict(x=x, weight=torch.ones(5, device=device)), ValueError, "weight"),
        (dict(x=x, weight=torch.ones(1, 4, device=device)), ValueError, "weight"),
        (dict(x=x, weight=np.ones(4, np.float32)), TypeError, "weight"),
        (dict(x=x, bias=torch.ones(4, dtype=torch.int64, device=device)), TypeError, "bias"),
        (dict(x=x, bias=torch.ones(4, device="meta")), ValueError, "bias"),
        (dict(x=x, eps=-1e-5), ValueError, "eps"),
        (dict(x=x, eps=float("nan")), ValueError, "eps"),
        (dict(x=x, eps="1e-5"), TypeError, "eps"),
        (dict(x=x, block_d=3), ValueError, "block_d"),
        (dict(x=x, block_rows=0), ValueError, "block_rows"),
        (dict(x=x, block_rows=2.0), TypeError, "block_rows"),
    ]


def test_bad_input_is_refused_naming_the_argument(ln, device):
    for kwargs, error, name in _bad_calls(device):
        with pytest.raises(error, match=name):
            ln.layer_norm(**kwargs)


@pytest.mark.slow  # a fresh interpreter importing torch and triton
def test_triton_imported_first_without_interpreter_is_refused(ln):
    code = "import triton\nimport ringlab.labs.layernorm\n"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["CUDA_VISIBLE_DEVICES"] = ""  # no GPU, so the interpreter is the only way to run
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "RuntimeError" in done.stderr
    assert "Import ringlab.labs.layernorm before triton" in done.stderr


COMPILE_FOR_GPU = """
import torch
torch.cuda.is_available = lambda: True  # pretend, so the module builds compiled (not interpreted) kernels
from ringlab.labs import layernorm
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
assert not layernorm.INTERPRET
pointers = dict(Mean="*fp32", Rstd="*fp32", n_rows="i32", n_cols="i32", stride_x="i32", stride_y="i32", eps="fp32")
for arch, dtype, block_rows, block_d, one_block, affine in [
    (90, "fp16", 1, 4096, True, True), (90, "bf16", 4, 1024, False, True), (80, "fp32", 64, 8, True, False),
]:
    consts = dict(HAS_WEIGHT=affine, HAS_BIAS=affine, BLOCK_ROWS=block_rows, BLOCK_D=block_d, ONE_BLOCK=one_block)
    signature = {**{name: "*" + dtype for name in "XYWB"}, **pointers, **{name: "constexpr" for name in consts}}
    source = ASTSource(fn=layernorm.layer_norm_fwd_kernel, signature=signature, constexprs=consts)
    compiled = triton.compile(source, target=GPUTarget("cuda", arch, 32), options={"num_warps": 8})
    assert compiled.asm["cubin"] and ".local" not in compiled.asm["ptx"]  # built, and no register spills
print("ok")
"""


@pytest.mark.slow  # Triton compiles the kernel
def test_kernel_compiles_for_gpus_without_one(ln, tmp_path):
    """The compiled path is type-checked on CPU: lower to PTX and cubin (Triton bundles ptxas) for sm_80/sm_90."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_CACHE_DIR=str(tmp_path), TRITON_DEFAULT_FP_FUSION="1", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-c", COMPILE_FOR_GPU], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


LEARNER_KERNEL = '''
import triton
import triton.language as tl

from ringlab.labs.layernorm import normalise_and_store


@triton.jit
def kernel(X, Y, W, B, Mean, Rstd, n_rows, n_cols, stride_x, stride_y, eps,
           HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr,
           BLOCK_ROWS: tl.constexpr, BLOCK_D: tl.constexpr, ONE_BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, BLOCK_D)
    row_mask = rows < n_rows
    col_mask = cols < n_cols
    x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=row_mask[:, None] & col_mask[None, :], other=0.0)
    x = x.to(tl.float32)
    mean = tl.sum(x, axis=1) / n_cols
    diff = x - mean[:, None]  # the classic slip: padded columns add mean**2 each to the variance
    rstd = 1.0 / tl.sqrt(tl.sum(diff * diff, axis=1) / n_cols + eps)
    normalise_and_store(x, mean, rstd, Y, W, B, stride_y, rows, cols, row_mask, col_mask, HAS_WEIGHT, HAS_BIAS)
    tl.store(Mean + rows, mean, mask=row_mask)
    tl.store(Rstd + rows, rstd, mask=row_mask)
'''


def test_launch_runs_a_kernel_from_another_file_and_awkward_d_exposes_it(ln, device, tmp_path):
    """How a grader would run a learner's kernel: same launch, caught only where D is not a power of two."""
    path = tmp_path / "learner_layernorm.py"
    path.write_text(LEARNER_KERNEL)
    spec = importlib.util.spec_from_file_location("learner_layernorm", path)
    learner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(learner)
    for d, should_match in [(128, True), (127, False)]:
        x, weight, bias = make_inputs(5, d, torch.float32, device, seed=d)
        x = x + 1  # a non-zero mean, so the slip shows
        out = ln.launch(learner.kernel, x, weight, bias, block_d=128)
        ref = torch.nn.functional.layer_norm(x, (d,), weight, bias, 1e-5)
        assert torch.allclose(out.y, ref, rtol=0, atol=1e-5) == should_match
