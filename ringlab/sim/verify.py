"""``ringlab.verify``: run a ring collective at many world sizes and check everything it did.

For each world size the check compares

* every rank's result with the direct reduction (:mod:`ringlab.sim.reference`: exact for
  integers, a Higham error bound for floats accumulated in float64),
* the bytes each rank sent, counted by the executor, with the closed form of
  :mod:`ringlab.collectives.ring` (and the total with ``2 (N - 1) * nbytes`` for all-reduce),
* all ranks' results with each other, byte for byte,
* the step count with the schedule's ``2 (N - 1)`` (all-reduce) or ``N - 1``,
* for gradient input, the averaged result with the full-batch gradient of one process.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import numpy as np

from ringlab.collectives import ring_all_gather_bytes, ring_all_reduce_bytes, ring_reduce_scatter_bytes

from .api import all_gather, reduce_scatter, ring_allreduce
from .ops import check_op, is_floating, resolve_dtype
from .reference import bit_identical, direct_reduce, max_error, unit_roundoff

DEFAULT_WORLD_SIZES = tuple(range(1, 17)) + (24, 32, 64, 128)
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")
INPUTS = ("gradients", "random")
# Float32 discrepancy allowed between the mean of per-rank gradients and the one-process
# full-batch gradient (different summation orders inside torch), relative to max |gradient|.
FULL_BATCH_RTOL = 1e-5


@dataclass(frozen=True)
class VerifyRow:
    """The checks for one world size; byte counts are ints, errors absolute."""

    world_size: int
    numel: int
    message_bytes: int
    sent_min: int
    sent_max: int
    ideal_per_rank: float  # 2(N-1)/N * M for all_reduce, (N-1)/N * M otherwise
    bytes_match: bool  # every rank's counted bytes == closed form, and sent == received in total
    total_bytes: int
    max_abs_error: float
    within_tolerance: bool
    bit_identical: bool
    steps: int
    steps_match: bool
    full_batch_error: float | None = None  # gradients input, sum/avg ops only
    full_batch_ok: bool | None = None

    @property
    def ok(self) -> bool:
        return (self.bytes_match and self.within_tolerance and self.bit_identical and self.steps_match
                and self.full_batch_ok is not False)


@dataclass(frozen=True)
class VerifyReport:
    """All rows of a verify run plus its settings; ``ok`` is True when every check passed."""

    collective: str
    algorithm: str
    op: str
    dtype: str
    input: str
    rows: tuple[VerifyRow, ...]
    model: str | None = None

    @property
    def ok(self) -> bool:
        return all(row.ok for row in self.rows)

    def to_dict(self) -> dict:
        rows = [dict(asdict(r), ok=r.ok) for r in self.rows]
        return {"collective": self.collective, "algorithm": self.algorithm, "op": self.op, "dtype": self.dtype,
                "input": self.input, "model": self.model, "ok": self.ok, "rows": rows}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def table(self) -> str:
        """Fixed-width text table, one line per world size."""
        head = ["N", "numel", "message B", "sent/rank min", "sent/rank max", "ideal/rank",
                "bytes", "max abs err", "values", "identical", "steps"]
        if any(r.full_batch_ok is not None for r in self.rows):
            head.append("vs full batch")
        lines = []
        for r in self.rows:
            cells = [str(r.world_size), str(r.numel), f"{r.message_bytes:,}", f"{r.sent_min:,}", f"{r.sent_max:,}",
                     f"{r.ideal_per_rank:,.1f}", _mark(r.bytes_match), f"{r.max_abs_error:.2e}",
                     _mark(r.within_tolerance), _mark(r.bit_identical), f"{r.steps}{'' if r.steps_match else '!'}"]
            if len(head) > len(cells):
                cells.append("-" if r.full_batch_ok is None else f"{r.full_batch_error:.1e} {_mark(r.full_batch_ok)}")
            lines.append(cells)
        widths = [max(len(h), *(len(c[i]) for c in lines)) if lines else len(h) for i, h in enumerate(head)]
        fmt = "  ".join(f"{{:>{w}}}" for w in widths)
        title = (f"ring {self.collective}, op={self.op}, dtype={self.dtype}, input={self.input}"
                 + (f" ({self.model})" if self.model else ""))
        out = [title, fmt.format(*head), fmt.format(*("-" * w for w in widths))]
        out += [fmt.format(*c) for c in lines]
        out.append(f"{'ALL CHECKS PASSED' if self.ok else 'MISMATCH FOUND'}: {sum(r.ok for r in self.rows)}"
                   f"/{len(self.rows)} world sizes")
        return "\n".join(out)


def _mark(ok: bool) -> str:
    return "ok" if ok else "FAIL"


def verify(world_sizes=DEFAULT_WORLD_SIZES, numel: int | None = None, dtype="float32", op: str = "sum",
           input: str = "gradients", collective: str = "all_reduce", seed: int = 0) -> VerifyReport:
    """Run a ring collective at each world size and check results, bytes, steps and agreement.

    Args:
        world_sizes: iterable of ints >= 1 (default 1..16, 24, 32, 64, 128).
        numel: elements per rank for ``input="random"`` (default 1_000_003); the gradient input's
            size is the model's parameter count, so passing ``numel`` with it is an error.
        dtype: ``"float32"``, ``"bf16"``, ``"int8"``... (see :func:`ringlab.sim.ops.resolve_dtype`).
            Gradients (float32) are cast to it; integer dtypes need ``input="random"``.
        op: ``sum | prod | max | min | avg`` (all_gather ignores it).
        input: ``"gradients"`` (a small torch transformer block, needs torch) or ``"random"``.
        collective: ``all_reduce | reduce_scatter | all_gather``.
        seed: seeds the random data and the model.

    Returns:
        :class:`VerifyReport`; ``report.ok`` is False if any check failed.

    Raises:
        ValueError / TypeError for unknown names, bad world sizes, or incompatible options.
    """
    dt = resolve_dtype(dtype)
    check_op(op, dt)
    if collective not in COLLECTIVES:
        raise ValueError(f"collective must be one of {', '.join(COLLECTIVES)}; got {collective!r}")
    if input not in INPUTS:
        raise ValueError(f"input must be one of {', '.join(INPUTS)}; got {input!r}")
    sizes = [int(n) for n in world_sizes]
    if not sizes or min(sizes) < 1:
        raise ValueError(f"world_sizes must be a non-empty list of integers >= 1, got {list(world_sizes)!r}")
    model = None
    if input == "gradients":
        if numel is not None:
            raise ValueError("numel applies to input='random'; the gradient bucket has the model's parameter count")
        if not is_floating(dt):
            raise TypeError(f"input='gradients' needs a floating dtype, got {dt}; use input='random' for integers")
        from .gradients import shard_gradients

        buckets = shard_gradients(sizes, seed=seed)
        model = next(iter(buckets.values())).model
    elif numel is None:
        numel = 1_000_003
    elif numel < 0:
        raise ValueError(f"numel must be >= 0, got {numel}")
    rng = np.random.default_rng(seed)
    rows = []
    for n in sizes:
        if input == "gradients":
            x, full = buckets[n].grads.astype(dt), buckets[n].full_batch
        else:
            x, full = _random(rng, n, numel, dt, op), None
        rows.append(_check(collective, x, op, full))
    return VerifyReport(collective, "ring", op, str(dt), input, tuple(rows), model)


def _random(rng, n: int, numel: int, dt: np.dtype, op: str) -> np.ndarray:
    if is_floating(dt):
        scale = 1.0 if op != "prod" else 0.1  # keep products of N values finite
        return (1.0 + scale * rng.standard_normal((n, numel)) if op == "prod"
                else rng.standard_normal((n, numel))).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, size=(n, numel), endpoint=True, dtype=dt)


def _check(collective: str, x: np.ndarray, op: str, full: np.ndarray | None) -> VerifyRow:
    n, numel = x.shape[0], x[0].size
    itemsize = x.dtype.itemsize
    nbytes = numel * itemsize
    if collective == "all_gather":
        shards = np.array_split(x[0].reshape(-1), n)  # rank r contributes chunk r of rank 0's data
        res = all_gather(shards)
        got, expected, tol = res.outputs, x[0].reshape(-1), None
        closed, ideal, steps = ring_all_gather_bytes(n, numel, itemsize), (n - 1) / n * nbytes, n - 1
        err, within = max_error(got, expected, None) if not is_floating(x.dtype) else _exact_float(got, expected)
    else:
        expected, tol = direct_reduce(x, op)
        if collective == "all_reduce":
            res = ring_allreduce(x, op=op)
            got = res.outputs
            closed, ideal, steps = ring_all_reduce_bytes(n, numel, itemsize), 2 * (n - 1) / n * nbytes, 2 * (n - 1)
        else:
            res = reduce_scatter(x, op=op)
            got = np.concatenate([np.asarray(o).reshape(-1) for o in res.outputs])[None]
            expected = expected.reshape(-1)
            tol = None if tol is None else tol.reshape(-1)
            closed, ideal, steps = ring_reduce_scatter_bytes(n, numel, itemsize), (n - 1) / n * nbytes, n - 1
        err, within = max_error(got, expected, tol)
    t = res.traffic
    bytes_match = bool(np.array_equal(t.bytes_sent, closed) and t.bytes_sent.sum() == t.bytes_received.sum())
    if collective == "all_reduce":
        bytes_match &= int(t.bytes_sent.sum()) == 2 * (n - 1) * nbytes
    fb_err = fb_ok = None
    if full is not None and op in ("sum", "avg") and collective == "all_reduce":
        mean = got[0].astype(np.float64) / (n if op == "sum" else 1)
        _, avg_tol = direct_reduce(x, "avg")
        slack = (unit_roundoff(x.dtype) + FULL_BATCH_RTOL) * np.abs(full).max(initial=0.0)
        diff = np.abs(mean - full.astype(np.float64))
        fb_err, fb_ok = float(diff.max(initial=0.0)), bool((diff <= avg_tol + slack).all())
    return VerifyRow(n, numel, nbytes, int(t.bytes_sent.min()), int(t.bytes_sent.max()), ideal, bytes_match,
                     int(t.bytes_sent.sum()), err, within, bit_identical(got), t.steps, t.steps == steps, fb_err, fb_ok)


def _exact_float(got: np.ndarray, expected: np.ndarray) -> tuple[float, bool]:
    """all_gather only copies: floats must come back bit for bit."""
    same = bit_identical(np.concatenate([expected[None], got.reshape(got.shape[0], -1)]))
    diff = np.abs(got.astype(np.float64) - expected.astype(np.float64))
    return float(np.nan_to_num(diff).max(initial=0.0)), same
