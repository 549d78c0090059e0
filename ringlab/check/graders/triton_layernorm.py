"""Grader for the Triton LayerNorm exercise (topic 12, card 12).

* 12a ``layer_norm_row``: a ``@triton.jit`` kernel, one program per row, with the signature
  ``(X, Y, W, B, Mean, Rstd, stride, n_cols, eps, BLOCK_D)``. The grader launches it itself
  (in Triton's CPU interpreter when there is no GPU) and compares y, mean and rstd with a
  float64 computation from the same inputs.

Every buffer the kernel touches is padded to a whole number of column blocks and the padding
is filled with NaN: a load that forgets its mask reads NaN instead of another row or memory
outside the tensor, so the mistake shows up as a wrong value, never as a crash, and a store
that forgets its mask is seen by the padding no longer being NaN.

``ringlab.labs.layernorm`` (torch and triton) is imported inside the grader, so importing
``ringlab.check`` stays light.
"""

from __future__ import annotations

import numpy as np
from ..engine import CaseFailure, run_grader
from ..exercise import Exercise
from ..result import NOT_ATTEMPTED, WRONG, GradeResult

EXERCISE_ID, FUNCTION = "12a", "layer_norm_row"


EDGE_COLS = (7, 127, 1000, 1)  # masks (7, 127), the loop over column blocks (1000), one element (1)


MAX_BLOCK_D = 256  # so D = 1000 needs four column blocks, the last one partly masked


EPS = 1e-5


# Rows of the N = 3 cases: an offset mean (checks the mean and centring), a large mean over a
# small spread (E[x^2] - E[x]^2 cancels there), and a constant row (var = 0: rstd = 1/sqrt(eps)).
ROW_OFFSETS = (3.0, 300.0, 0.75)


ROW_SCALES = (1.0, 0.5, 0.0)


# |got - expected| <= ATOL + RTOL * |expected|. Statistics are fp32 whatever the input, so they
# get fp32 tolerances (a correct kernel is within about 1e-7 here); y is rounded to the input
# dtype (fp16 keeps 11 significant bits). On top of that y may carry the rounding of the fp32
# mean: an error of MEAN_ULPS * |mean| in the mean moves y by that times rstd * |w| (it is what
# limits y on the row of mean 300, whatever the kernel does).
STAT_TOL = (1e-6, 1e-5)


Y_TOL = {"float32": (1e-5, 1e-5), "float16": (1e-3, 2.0**-10)}


MEAN_ULPS = 2.0**-20  # 16 units in the last place of an fp32 number


def layer_norm_cases() -> list[dict]:
    """fp32 then fp16; D = 7, 127, 1000, 1; N = 1 and 3 (16 cases)."""
    return [{"dtype": dtype, "n_cols": d, "n_rows": n, "seed": 10 * d + n}
            for dtype in ("float32", "float16") for d in EDGE_COLS for n in (1, 3)]


def reference_float64(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float):
    """``(y, mean, rstd)`` in float64 for ``x`` of shape (N, D): biased variance, centred two-pass."""
    x = x.astype(np.float64)
    mean = x.mean(axis=1)
    var = np.square(x - mean[:, None]).mean(axis=1)
    rstd = 1.0 / np.sqrt(var + eps)
    return (x - mean[:, None]) * rstd[:, None] * weight + bias, mean, rstd


def _inputs(n_rows: int, n_cols: int, dtype: str, seed: int):
    rng = np.random.default_rng(seed)
    x = np.array([off + scale * rng.standard_normal(n_cols) for off, scale in zip(ROW_OFFSETS, ROW_SCALES)])
    weight = 1.0 + 0.5 * rng.standard_normal(n_cols)
    bias = 0.5 * rng.standard_normal(n_cols)
    return x[:n_rows].astype(dtype), weight.astype(np.float32), bias.astype(np.float32)


def _bad(got: np.ndarray, want: np.ndarray, tol: tuple[float, float], extra=0.0) -> np.ndarray:
    atol, rtol = tol
    with np.errstate(invalid="ignore"):
        return ~(np.abs(got - want) <= atol + rtol * np.abs(want) + extra)


def _close(a: float, b: float) -> bool:
    return bool(np.isclose(a, b, rtol=1e-4, atol=0.0, equal_nan=True))


def _explain_stat(name: str, got: float, want: float, row: np.ndarray, block_d: int, n_pad: int) -> str:
    """Name the common mistake a wrong mean or rstd of ``row`` (D input values) matches, if any."""
    d = row.size
    mean = row.astype(np.float64).mean()
    m2 = np.square(row - mean).sum()
    if np.isnan(got) and n_pad:
        return ("; the padding after the row's last column holds NaN, so a load without mask= (or a mask that "
                "lets columns >= n_cols through) read it")
    with np.errstate(divide="ignore", invalid="ignore"):
        candidates = {"mean": [
            (mean * d / (d + n_pad) if n_pad else None,
             f"the row's sum divided by {d + n_pad} (whole blocks), not by n_cols = {d}"),
            (row[:block_d].astype(np.float64).sum() / d if d > block_d else None,
             f"the sum of the first BLOCK_D = {block_d} columns only: loop over the column blocks"),
        ], "rstd": [
            (1.0 / np.sqrt(m2 / (d - 1) + EPS) if d > 1 else np.nan,
             "the unbiased variance (divided by D - 1); LayerNorm divides by D"),
            (1.0 / np.sqrt(m2 / d), "1/sqrt(var): eps is missing under the square root"),
            (np.sqrt(m2 / d + EPS), "the standard deviation sqrt(var + eps), not its reciprocal"),
            (1.0 / np.sqrt((m2 + n_pad * mean * mean) / d + EPS) if n_pad else None,
             f"a variance that counts the {n_pad} padded lanes as (0 - mean)**2: zero them with tl.where(mask, ...)"),
        ]}[name]
    for value, words in candidates:
        if value is not None and _close(got, value):
            return f"; it matches {words}"
    if row.dtype == np.float16 and 1e-5 < abs(got - want) / abs(want) < 1e-2:
        return (f"; a relative error of {abs(got - want) / abs(want):.1e} is the size of fp16 rounding "
                "(2**-11 = 4.9e-04): are the sums kept in fp16? Cast loads with .to(tl.float32)")
    if name == "rstd" and abs(mean) > 100 * np.sqrt(m2 / d):
        return (f"; this row's mean ({mean:.4g}) is large next to its spread, so sum(x*x)/D - mean**2 subtracts "
                "two nearly equal numbers and loses its digits: sum (x - mean)**2 instead")
    return ""


def _triton_error(exc: BaseException) -> BaseException:
    """The learner's own exception inside Triton's wrappers (InterpreterError, CompilationError)."""
    innermost, seen = exc, exc
    while seen is not None:
        if isinstance(seen, NotImplementedError):
            return seen
        innermost, seen = seen, seen.__cause__ or seen.__context__
    return innermost


def check_layer_norm_row(fn, dtype: str, n_cols: int, n_rows: int, seed: int) -> None:
    """12a: launch ``fn`` over ``n_rows`` programs and compare mean, rstd, y and the padding."""
    import torch
    import triton

    from ringlab.labs import layernorm

    block_d = min(triton.next_power_of_2(n_cols), MAX_BLOCK_D)
    width = triton.cdiv(n_cols, block_d) * block_d
    n_pad = width - n_cols
    device = "cpu" if layernorm.INTERPRET else "cuda"
    x, weight, bias = _inputs(n_rows, n_cols, dtype, seed)
    want_y, want_mean, want_rstd = reference_float64(x, weight, bias, EPS)

    def padded(values: np.ndarray, torch_dtype) -> torch.Tensor:
        buf = np.full(values.shape[:-1] + (width,), np.nan, dtype=values.dtype)
        buf[..., :n_cols] = values
        return torch.from_numpy(buf).to(device=device, dtype=torch_dtype)

    tdtype = getattr(torch, dtype)
    X, Y = padded(x, tdtype), padded(np.full_like(x, np.nan), tdtype)
    W, B = padded(weight, torch.float32), padded(bias, torch.float32)
    Mean = torch.full((n_rows,), float("nan"), dtype=torch.float32, device=device)
    Rstd = torch.full_like(Mean, float("nan"))
    try:
        fn[(n_rows,)](X, Y, W, B, Mean, Rstd, width, n_cols, EPS, BLOCK_D=block_d)
    except Exception as exc:  # noqa: BLE001 - Triton wraps the learner's error; report the inner one
        inner = _triton_error(exc)
        if isinstance(inner, NotImplementedError):
            raise inner from None
        raise CaseFailure(f"launching the kernel with BLOCK_D={block_d} raised {type(inner).__name__}: "
                          f"{str(inner).strip().splitlines()[-1] if str(inner).strip() else ''}") from None
    where = f" (D = {n_cols}, BLOCK_D = {block_d}, eps = {EPS})"
    for name, got, want in (("mean", Mean, want_mean), ("rstd", Rstd, want_rstd)):
        got = got.cpu().numpy().astype(np.float64)
        bad = np.flatnonzero(_bad(got, want, STAT_TOL))
        if bad.size:
            r = int(bad[0])
            raise CaseFailure(f"row {r}: {name} is {got[r]:.7g}, expected {want[r]:.7g}{where}"
                              + _explain_stat(name, got[r], want[r], x[r], block_d, n_pad))
    out = Y.cpu().to(torch.float64).numpy()
    from_mean = MEAN_ULPS * np.abs(want_mean * want_rstd)[:, None] * np.abs(weight)
    bad = np.argwhere(_bad(out[:, :n_cols], want_y, Y_TOL[dtype], from_mean))
    if bad.size:
        r, c = (int(v) for v in bad[0])
        hint = ""
        if np.isnan(out[r, c]) and np.isnan(out[r, :n_cols]).all():
            hint = "; no column of that row was written: does every program store its row?"
        tol = Y_TOL[dtype][0] + Y_TOL[dtype][1] * abs(want_y[r, c]) + from_mean[r, c]
        raise CaseFailure(f"row {r}, column {c}: y is {out[r, c]:.7g}, expected {want_y[r, c]:.7g} "
                          f"(tolerance {tol:.2g} in {dtype}){where}{hint}")
    written = np.argwhere(~np.isnan(out[:, n_cols:]))
    if written.size:
        r, c = (int(v) for v in written[0])
        raise CaseFailure(f"row {r}: the kernel wrote column {n_cols + c}, past the row's last column {n_cols - 1}"
                          f"{where}; on a GPU that store lands in the next row or outside the tensor: mask it")


def _is_triton_kernel(fn) -> bool:
    return callable(getattr(fn, "__getitem__", None)) and hasattr(fn, "fn")


def _layer_norm_row(fn) -> GradeResult:
    try:
        from ringlab.labs import layernorm  # noqa: F401 - sets up the interpreter before triton loads
    except ImportError as exc:
        return GradeResult(EXERCISE_ID, FUNCTION, NOT_ATTEMPTED, f"cannot run Triton kernels here: {exc}")
    except RuntimeError as exc:  # triton was imported before TRITON_INTERPRET could be set
        return GradeResult(EXERCISE_ID, FUNCTION, WRONG, str(exc))
    if fn is not None and not _is_triton_kernel(fn):
        return GradeResult(EXERCISE_ID, FUNCTION, WRONG,
                           f"{FUNCTION} is a plain Python {type(fn).__name__}: decorate it with @triton.jit "
                           "(the grader launches it as layer_norm_row[(n_rows,)](...))")
    return run_grader(EXERCISE_ID, FUNCTION, fn, check_layer_norm_row, layer_norm_cases(),
                      passed_message="mean, rstd and y match float64 at D = 1, 7, 127, 1000 in fp32 and fp16, "
                                     "and nothing past a row's end was written")


EXERCISES = (
    Exercise(EXERCISE_ID, FUNCTION, "A LayerNorm forward kernel in Triton",
             _layer_norm_row, (
                 "tl.arange(0, BLOCK_D) needs a power of two, but D is not one: build mask = cols < n_cols and pass "
                 "it to every tl.load and tl.store, with other=0.0 on loads.",
                 "Loop `for start in range(0, n_cols, BLOCK_D)` once to sum x (mean = sum / n_cols), once to sum "
                 "(x - mean)**2, and once to write y. Masked lanes load 0.0, so (0 - mean)**2 must be zeroed with "
                 "tl.where(mask, x - mean, 0.0) before it is added.",
                 "Cast every load with .to(tl.float32) before adding (tl.sum of fp16 stays fp16), divide the "
                 "squared deviations by n_cols (not n_cols - 1), take rstd = 1.0 / tl.sqrt(var + eps), store "
                 "Mean + row and Rstd + row, and store y with y.to(Y.dtype.element_ty) under the mask.",
             )),
)
