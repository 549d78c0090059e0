"""``ringlab.verify``: run a collective algorithm at many world sizes and check everything it did.

For each world size the check compares

* every rank's result with the direct computation (:func:`ringlab.sim.runner.expected_outputs`:
  exact for integers and for copies, a Higham error bound for float reductions accumulated in float64),
* the bytes each rank sent, counted by the executor, with the algorithm's closed form in
  :mod:`ringlab.collectives` (and, for ring all-reduce, the total with ``2 (N - 1) * nbytes``),
* all ranks' results with each other, byte for byte (all_reduce, all_gather, broadcast; the naive
  direct all-reduce is expected to differ for floats, see :mod:`ringlab.collectives.direct`),
* the step count with the closed form (``2 (N - 1)`` for ring all-reduce, ``N - 1`` for ring
  reduce-scatter / all-gather),
* for gradient input and all-reduce, the averaged result with the full-batch gradient of one process.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sized
from dataclasses import asdict, dataclass

import numpy as np

from ringlab import textfmt
from ringlab.validation import check_int
from ringlab.collectives import algorithms_for, get_algorithm, get_schedule
from ringlab.collectives.cost import bus_factor

from .runner import expected_outputs, run_collective
from .gradients import shard_gradients
from .memory import check_fits, run_bytes
from .ops import check_op, is_floating, resolve_dtype
from .reference import bit_identical, direct_reduce, max_error, unit_roundoff

# Ranks at most: the memory check below (ringlab.sim.memory) is what bounds a run on a given machine.
MAX_WORLD_SIZE = 1 << 17
MAX_WORLD_SIZES_LISTED = 4096  # runs per call: each is a full simulation
# input="gradients" runs one backward pass per rank (about a millisecond each): a few seconds at this size.
MAX_GRADIENT_WORLD_SIZE = 4096
DEFAULT_WORLD_SIZES = tuple(range(1, 17)) + (24, 32, 64, 128)
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
    ideal_per_rank: float  # nccl-tests busbw factor x M: 2(N-1)/N all_reduce, (N-1)/N RS/AG/A2A, 1 bcast/reduce
    bytes_match: bool  # every rank's counted bytes == closed form, and sent == received in total
    total_bytes: int
    max_abs_error: float
    within_tolerance: bool
    bit_identical: bool | None  # None where ranks legitimately hold different results
    steps: int
    steps_match: bool
    full_batch_error: float | None = None  # gradients input, sum/avg ops only
    full_batch_ok: bool | None = None
    identical_expected: bool = True  # False for the naive direct all-reduce (ranks sum in different orders)

    @property
    def ok(self) -> bool:
        identical = self.bit_identical is not False or not self.identical_expected
        return (self.bytes_match and self.within_tolerance and identical and self.steps_match
                and self.full_batch_ok is not False)


@dataclass(frozen=True)
class VerifyReport:
    """All rows of a verify run plus its settings; ``ok`` is True when every check passed."""

    collective: str
    algorithm: str
    op: str | None  # None for the collectives that only move data
    dtype: str
    input: str
    rows: tuple[VerifyRow, ...]
    model: str | None = None
    root: int | None = None  # broadcast / reduce only

    @property
    def ok(self) -> bool:
        return all(row.ok for row in self.rows)

    def to_dict(self) -> dict:
        rows = [dict(asdict(r), ok=r.ok) for r in self.rows]
        for row in rows:  # only the naive direct all-reduce needs this key
            if row["identical_expected"]:
                del row["identical_expected"]
        out = {"collective": self.collective, "algorithm": self.algorithm, "op": self.op, "dtype": self.dtype,
               "input": self.input, "model": self.model, "ok": self.ok, "rows": rows}
        if self.root is not None:
            out["root"] = self.root
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def table(self, errors: bool = True, narrow: bool = False) -> str:
        """Fixed-width text table, one line per world size.

        ``errors=False`` leaves out the error magnitudes (``max abs err``, the number before the
        full-batch verdict) and keeps the verdicts: those magnitudes depend on which SIMD kernels and
        how many threads numpy and torch use, so a committed notebook output prints only verdicts.
        ``narrow=True`` (the command line) fits :data:`ringlab.textfmt.WIDTH` columns: shorter headers,
        and the element count in the title when every row has the same one.
        """
        if narrow:
            return self._narrow_table(errors)
        head = ["N", "numel", "message B", "sent/rank min", "sent/rank max", "ideal/rank",
                "bytes"] + (["max abs err"] if errors else []) + ["values", "identical", "steps"]
        if any(r.full_batch_ok is not None for r in self.rows):
            head.append("vs full batch")
        lines = []
        for r in self.rows:
            cells = [str(r.world_size), str(r.numel), f"{r.message_bytes:,}", f"{r.sent_min:,}", f"{r.sent_max:,}",
                     f"{r.ideal_per_rank:,.1f}", _mark(r.bytes_match)]
            cells += [f"{r.max_abs_error:.2e}"] if errors else []
            cells += [_mark(r.within_tolerance), _identical_mark(r), f"{r.steps}{'' if r.steps_match else '!'}"]
            if len(head) > len(cells):
                if r.full_batch_ok is None:
                    cells.append("-")
                else:
                    cells.append(f"{r.full_batch_error:.1e} {_mark(r.full_batch_ok)}" if errors
                                 else _mark(r.full_batch_ok))
            lines.append(cells)
        widths = [max(len(h), *(len(c[i]) for c in lines)) if lines else len(h) for i, h in enumerate(head)]
        fmt = "  ".join(f"{{:>{w}}}" for w in widths)
        title = (f"{self.algorithm} {self.collective}"
                 + (f", root={self.root}" if self.root is not None else "")
                 + (f", op={self.op}" if self.op is not None else "")
                 + f", dtype={self.dtype}, input={self.input}"
                 + (f" ({self.model})" if self.model else ""))
        out = [title, fmt.format(*head), fmt.format(*("-" * w for w in widths))]
        out += [fmt.format(*c) for c in lines]
        out.append(f"{'ALL CHECKS PASSED' if self.ok else 'MISMATCH FOUND'}: {sum(r.ok for r in self.rows)}"
                   f"/{len(self.rows)} world sizes")
        return "\n".join(out)


    def _narrow_table(self, errors: bool) -> str:
        same = len({r.numel for r in self.rows}) == 1
        head = ["N"] + ([] if same else ["numel"]) + ["message B", "min sent", "max sent", "ideal B", "bytes"] + (
            ["max err"] if errors else []) + ["values", "steps", "identical", "full batch"]
        rows = []
        for r in self.rows:
            cells = [f"{r.world_size:,}"] + ([] if same else [f"{r.numel:,}"]) + [
                f"{r.message_bytes:,}", f"{r.sent_min:,}", f"{r.sent_max:,}", f"{r.ideal_per_rank:,.1f}",
                _mark(r.bytes_match)] + ([f"{r.max_abs_error:.2e}"] if errors else [])
            batch = "-" if r.full_batch_ok is None else _mark(r.full_batch_ok) + (
                f" {r.full_batch_error:.1e}" if errors else "")
            rows.append(cells + [_mark(r.within_tolerance), f"{r.steps}{'' if r.steps_match else '!'}",
                                 _identical_mark(r), batch])
        title = (f"{self.algorithm} {self.collective}"
                 + (f", root={self.root}" if self.root is not None else "")
                 + (f", op={self.op}" if self.op is not None else "")
                 + f", dtype={self.dtype}, input={self.input}" + (f" ({self.model})" if self.model else ""))
        out = [textfmt.wrap(title)] + ([f"{self.rows[0].numel:,} elements per rank"] if same and self.rows else [])
        out += textfmt.table(head, rows, align="r" * (len(head) - 2) + "ll")
        out.append(f"{'ALL CHECKS PASSED' if self.ok else 'MISMATCH FOUND'}: {sum(r.ok for r in self.rows)}"
                   f"/{len(self.rows)} world sizes")
        return "\n".join(out)


def _mark(ok: bool) -> str:
    return "ok" if ok else "FAIL"


def _identical_mark(row: VerifyRow) -> str:
    if row.bit_identical is None:
        return "-"
    if not row.bit_identical and not row.identical_expected:
        return "no (expected)"
    return _mark(row.bit_identical)


def verify(world_sizes=DEFAULT_WORLD_SIZES, numel: int | None = None, dtype="float32", op: str = "sum",
           input: str = "gradients", collective: str = "all_reduce", seed: int = 0, algorithm: str | None = None,
           root: int = 0) -> VerifyReport:
    """Run a collective algorithm at each world size and check results, bytes, steps and agreement.

    Args:
        world_sizes: iterable of ints >= 1 (default 1..16, 24, 32, 64, 128).
        numel: elements per rank for ``input="random"`` (default 1_000_003); the gradient input's
            size is the model's parameter count, so passing ``numel`` with it is an error.
        dtype: ``"float32"``, ``"bf16"``, ``"int8"``... (see :func:`ringlab.sim.ops.resolve_dtype`).
            Gradients (float32) are cast to it; integer dtypes need ``input="random"``.
        op: ``sum | prod | max | min | avg`` for the reducing collectives; all_gather, broadcast and
            all_to_all refuse any other op than the default (they combine nothing).
        input: ``"gradients"`` (a small torch transformer block, needs torch) or ``"random"``.
        collective: ``all_reduce | reduce_scatter | all_gather | broadcast | reduce | all_to_all``.
        seed: seeds the random data and the model.
        algorithm: one of :func:`ringlab.collectives.algorithms_for` ``(collective)``; default ``"ring"``
            where it exists, else the collective's first algorithm.
        root: root rank of broadcast / reduce; must be below every world size.

    Returns:
        :class:`VerifyReport`; ``report.ok`` is False if any check failed.

    Raises:
        ValueError / TypeError for unknown names, bad world sizes, roots or incompatible options.
    """
    dt = resolve_dtype(dtype)
    check_op(op, dt)
    names = algorithms_for(collective)
    algorithm = algorithm or ("ring" if "ring" in names else names[0])
    algo = get_algorithm(collective, algorithm)
    if input not in INPUTS:
        raise ValueError(f"input must be one of {', '.join(INPUTS)}; got {input!r}")
    if isinstance(world_sizes, (str, bytes)) or not isinstance(world_sizes, Iterable):
        raise TypeError(f"world_sizes must be a list of integers, got {type(world_sizes).__name__}")
    if isinstance(world_sizes, Sized) and len(world_sizes) > MAX_WORLD_SIZES_LISTED:
        raise ValueError(f"world_sizes lists {len(world_sizes):,} sizes; at most {MAX_WORLD_SIZES_LISTED:,} per call")
    sizes = [check_int(n, "world_sizes entry", min=1, max=MAX_WORLD_SIZE) for n in world_sizes]
    if not sizes or len(sizes) > MAX_WORLD_SIZES_LISTED:
        raise ValueError(f"world_sizes must list 1 to {MAX_WORLD_SIZES_LISTED:,} integers in 1..{MAX_WORLD_SIZE}, "
                         f"got {len(sizes):,}")
    seed = check_int(seed, "seed", min=0)
    root = check_int(root, "root", min=0)
    if numel is not None:
        numel = check_int(numel, "numel", min=0)
    if algo.rooted and not 0 <= root < min(sizes):
        raise ValueError(f"root must be in [0, {min(sizes) - 1}] for world sizes {sizes}, got {root}")
    if not algo.rooted and root != 0:
        raise ValueError(f"root applies to broadcast and reduce only, not {collective}")
    if not algo.reducing and op != "sum":
        raise ValueError(f"op applies to the reducing collectives (all_reduce, reduce_scatter, reduce) only; "
                         f"{collective} moves data without combining it, so leave op at its default")
    model = None
    if input == "gradients":
        if numel is not None:
            raise ValueError("numel applies to input='random'; the gradient bucket has the model's parameter count")
        if not is_floating(dt):
            raise TypeError(f"input='gradients' needs a floating dtype, got {dt}; use input='random' for integers")
        if max(sizes) > MAX_GRADIENT_WORLD_SIZE:
            raise ValueError(f"input='gradients' runs one backward pass per rank: world sizes up to "
                             f"{MAX_GRADIENT_WORLD_SIZE}, got {max(sizes)}; use input='random' for larger clusters")
        buckets = shard_gradients(sizes, seed=seed)
        model = next(iter(buckets.values())).model
    elif numel is None:
        numel = 1_000_003
    elif numel < 0:
        raise ValueError(f"numel must be >= 0, got {numel}")
    rng = np.random.default_rng(seed)
    for n in sizes:  # refuse before generating anything: inputs, the run, and the float64 reference
        elems = numel if input == "random" else buckets[n].grads.shape[1]
        need = run_bytes(get_schedule(collective, algorithm, n, root), elems, dt.itemsize) + n * elems * (dt.itemsize + 16)
        check_fits(f"verify at world size {n} with {elems} elements", need)
    rows = []
    for n in sizes:
        if input == "gradients":
            x, full = buckets[n].grads.astype(dt), buckets[n].full_batch
        else:
            x, full = _random(rng, n, numel, dt, op), None
        rows.append(_check(collective, algorithm, x, op, full, root))
    return VerifyReport(collective, algorithm, op if algo.reducing else None, str(dt), input, tuple(rows), model,
                        root if algo.rooted else None)


def _random(rng, n: int, numel: int, dt: np.dtype, op: str) -> np.ndarray:
    if is_floating(dt):
        scale = 1.0 if op != "prod" else 0.1  # keep products of N values finite
        return (1.0 + scale * rng.standard_normal((n, numel)) if op == "prod"
                else rng.standard_normal((n, numel))).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, size=(n, numel), endpoint=True, dtype=dt)


def _check(collective: str, algorithm: str, x: np.ndarray, op: str, full: np.ndarray | None,
           root: int) -> VerifyRow:
    n, numel = x.shape[0], x[0].size
    itemsize = x.dtype.itemsize
    nbytes = numel * itemsize
    algo = get_algorithm(collective, algorithm)
    # all_gather: rank r contributes chunk r of rank 0's data, so the gathered message is rank 0's row
    inputs = np.array_split(x[0].reshape(-1), n) if collective == "all_gather" else x
    res = run_collective(collective, algorithm, inputs, op=op, root=root)
    expected, tol = expected_outputs(collective, inputs, op=op, root=root)
    got = res.outputs
    if collective == "reduce_scatter":
        got = np.concatenate([np.asarray(o).reshape(-1) for o in got])[None]
    if collective in ("all_reduce", "reduce_scatter", "reduce") or not is_floating(x.dtype):
        err, within = max_error(got, expected, tol)
    else:
        err, within = _exact_float(got, expected)
    identical = bit_identical(got) if collective in ("all_reduce", "all_gather", "broadcast") else None
    closed = algo.bytes_sent(n, numel, itemsize, root)
    t = res.traffic
    bytes_match = bool(np.array_equal(t.bytes_sent, closed) and t.bytes_sent.sum() == t.bytes_received.sum())
    if (collective, algorithm) == ("all_reduce", "ring"):
        bytes_match &= int(t.bytes_sent.sum()) == 2 * (n - 1) * nbytes
    fb_err = fb_ok = None
    if full is not None and op in ("sum", "avg") and collective == "all_reduce":
        mean = got[0].astype(np.float64) / (n if op == "sum" else 1)
        _, avg_tol = direct_reduce(x, "avg")
        slack = (unit_roundoff(x.dtype) + FULL_BATCH_RTOL) * np.abs(full).max(initial=0.0)
        diff = np.abs(mean - full.astype(np.float64))
        fb_err, fb_ok = float(diff.max(initial=0.0)), bool((diff <= avg_tol + slack).all())
    steps = algo.num_steps(n)
    return VerifyRow(n, numel, nbytes, int(t.bytes_sent.min()), int(t.bytes_sent.max()),
                     bus_factor(collective, n) * nbytes, bytes_match, int(t.bytes_sent.sum()), err, within, identical,
                     t.steps, t.steps == steps, fb_err, fb_ok, algo.bit_identical)


def _exact_float(got: np.ndarray, expected: np.ndarray) -> tuple[float, bool]:
    """Copies (all_gather, broadcast, all_to_all) must come back bit for bit."""
    e = np.broadcast_to(expected, got.shape)
    same = bool(np.array_equal(np.ascontiguousarray(got).reshape(-1).view(np.uint8),
                               np.ascontiguousarray(e).reshape(-1).view(np.uint8)))
    diff = np.abs(got.astype(np.float64) - e.astype(np.float64))
    return float(np.nan_to_num(diff).max(initial=0.0)), same
