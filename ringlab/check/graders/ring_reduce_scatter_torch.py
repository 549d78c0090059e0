"""Grader for 03a (topic 03, card 03): the learner's per-rank ring reduce-scatter in real processes.

``ring_reduce_scatter_p2p(tensor, group) -> (output, bytes_sent)`` (or just ``output``) runs in
:data:`GRADE_WORLD` gloo processes started once by :func:`ringlab.dist.launch`. Every rank joins
subgroups of the first n ranks, n = 1..6, each with a short timeout (:data:`CASE_TIMEOUT_S`), and
runs every case of its subgroups in order; inputs are small integers, so sums are exact in any
order and dtype. In this process each rank's output is compared with chunk ``rank`` of
``numpy.array_split`` of the direct sum over ranks, and a reported byte count with the closed
form ``itemsize * (numel - c[rank])`` (a ring rank sends every chunk but the one it keeps, once).

Never hangs and never raises: a send or receive that outlives the subgroup timeout is reported
as a hang (a deadlock) naming the ranks and the case; a rank that raises is named with its
exception; a whole launch past :data:`LAUNCH_TIMEOUT_S` (a rank stuck outside torch.distributed)
is named from per-rank progress files. One launch costs most of the grading time: starting 6
processes that import torch takes about 10-20 s on a busy 2-core machine, the cases well under 1 s.
torch is imported only inside the functions that need it, so ``import ringlab.check`` stays torch-free.
"""

from __future__ import annotations

import ast
import datetime
import importlib.util
import inspect
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

from ringlab.collectives import chunk_sizes
from ringlab.dist import LaunchTimeout, RankError, launch

from ..engine import CaseFailure, run_grader
from ..exercise import Exercise
from ..result import NOT_ATTEMPTED, WRONG, GradeResult, TrafficRow

FUNCTION = "ring_reduce_scatter_p2p"


GRADE_WORLD = 6


CASE_TIMEOUT_S = 6.0  # a send/recv waiting this long counts as a hang; the cases themselves take milliseconds


LAUNCH_TIMEOUT_S = 120.0  # start-up of 6 torch processes on a loaded 2-core machine included


DTYPES = {"float32": 4, "int64": 8, "float64": 8}  # name -> itemsize in bytes


def grading_cases() -> list[dict]:
    """World sizes 1..6 in order; numel N - 1 (an empty chunk), 3N, 3N + 1 and 257 (prime: uneven chunks)."""
    cases = []
    for n in range(1, GRADE_WORLD + 1):
        plans = [(3 * n, "float32"), (3 * n + 1, "int64"), (257, "float64")]
        if n > 1:
            plans.insert(0, (n - 1, "float32"))
        cases += [{"world_size": n, "numel": m, "dtype": d, "seed": 100 * n + m} for m, d in plans]
    return cases


def rank_input(case: dict, rank: int) -> np.ndarray:
    """Rank ``rank``'s input for ``case``: integers in [-20, 20] as ``case["dtype"]`` (exact sums)."""
    rng = np.random.default_rng([case["seed"], rank])
    return rng.integers(-20, 21, size=case["numel"]).astype(case["dtype"])


def _untouched_stub(fn) -> str | None:
    """The message of ``raise NotImplementedError(...)`` if that is all ``fn`` does, else None.

    Read from the source, so an untouched stub is reported without starting processes or
    running the learner's code here.
    """
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    func = tree.body[0] if tree.body else None
    if not isinstance(func, ast.FunctionDef):
        return None
    body = func.body[1:] if ast.get_docstring(func) is not None else func.body
    if len(body) == 1 and isinstance(body[0], ast.Raise) and isinstance(body[0].exc, ast.Call):
        call = body[0].exc
        if getattr(call.func, "id", None) == "NotImplementedError":
            args = [a.value for a in call.args if isinstance(a, ast.Constant)]
            return str(args[0]) if args else "NotImplementedError"
    return None


def _reference(fn):
    """What the children can import: ``fn`` itself when its module is importable by name, else (path, name)."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    if module is not None and fn.__module__ != "__main__" and getattr(module, fn.__qualname__, None) is fn:
        return fn
    try:
        path = inspect.getsourcefile(fn)
    except TypeError:
        path = None
    if path is None or not Path(path).is_file() or fn.__name__ == "<lambda>" or fn.__qualname__ != fn.__name__:
        raise CaseFailure(f"{FUNCTION} must be a module-level function in a .py file (the grader imports it in "
                          f"{GRADE_WORLD} new processes; a function typed in a notebook cell cannot be imported)")
    return path, fn.__name__


def _resolve(reference):
    if callable(reference):
        return reference
    path, name = reference
    spec = importlib.util.spec_from_file_location("ringlab_graded_ex06", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


class _LaunchFailure(CaseFailure):
    """The launch itself failed; ``case`` is the case it was on, when known."""

    def __init__(self, message: str, case: dict | None = None):
        super().__init__(message)
        self.case = case


def _plain(result, torch):
    """The learner's return value as picklable data: ``(kind, output, bytes_sent)``.

    ``bytes_sent`` stays None when not reported, becomes an int when it is one, else its repr.
    """
    output, sent = result if isinstance(result, tuple) and len(result) == 2 else (result, None)
    if isinstance(sent, torch.Tensor) and sent.numel() == 1:
        sent = sent.item()
    if not isinstance(output, torch.Tensor):
        return "other", type(result).__name__, None
    if sent is not None and not isinstance(sent, (int, np.integer)):
        sent = repr(sent)
    return "tensor", output.detach().cpu().numpy().copy(), sent


def grade_rank(reference, cases: list[dict], case_timeout_s: float, progress_dir: str) -> dict:
    """Body of each grading process: ``{case index: outcome}`` for the cases this rank takes part in.

    An outcome is ``("tensor", ndarray, bytes_sent or repr)``, ``("other", type name, None)`` or
    ``("error", exception type name, message)``; the rank stops at its first error, since its
    peers may be stuck waiting for it. Before each case it writes the case index to
    ``progress_dir/rank<r>`` so that a launch timeout can name the case.
    """
    import torch
    import torch.distributed as dist

    rank = dist.get_rank()
    limit = datetime.timedelta(seconds=case_timeout_s)
    sizes = sorted({c["world_size"] for c in cases})
    groups = {n: dist.new_group(list(range(n)), timeout=limit) for n in sizes}  # every rank creates every group
    fn = _resolve(reference)
    outcomes = {}
    for index, case in enumerate(cases):
        if rank >= case["world_size"]:
            continue
        (Path(progress_dir) / f"rank{rank}").write_text(str(index))
        tensor = torch.from_numpy(rank_input(case, rank))
        try:
            outcomes[index] = _plain(fn(tensor, groups[case["world_size"]]), torch)
        except Exception as exc:  # noqa: BLE001 - reported to the learner, rank named
            outcomes[index] = ("error", type(exc).__name__, str(exc))
            break
    return outcomes


def _hung_message(ranks: list[int], seconds: float) -> str:
    return (f"ranks {ranks} hung: a send or receive waited more than {seconds:g} s, a deadlock. "
            "If every rank blocks in send (dist.send, or isend(...).wait()) before posting its receive, no "
            "receive is ever posted; post both together with dist.batch_isend_irecv and then wait")


def _communication_error(message: str) -> bool:
    """gloo's errors (a timeout, a reset connection) name its source files; the learner's do not."""
    text = message.lower()
    return "gloo" in text or "timed out" in text or "connection" in text


def check_case(case: dict, outcomes: dict) -> None:
    """Raise CaseFailure for the first problem with this case's per-rank ``outcomes`` ({rank: outcome})."""
    n, numel, dtype = case["world_size"], case["numel"], case["dtype"]
    errors = {r: o for r, o in outcomes.items() if o is not None and o[0] == "error"}
    # The learner's own exception first: a peer of a rank that left sees its connection reset or times out.
    crashed = {r: o for r, o in errors.items() if not _communication_error(o[2])}
    if crashed:
        rank = min(crashed)
        _, kind, message = crashed[rank]
        if kind == "NotImplementedError":
            raise NotImplementedError(message)
        raise CaseFailure(f"rank {rank} raised {kind}: {message}")
    hung = sorted(r for r, o in errors.items() if "timed out" in o[2].lower())
    if hung:
        raise CaseFailure(_hung_message(hung, CASE_TIMEOUT_S))
    if errors:
        rank = min(errors)
        raise CaseFailure(f"rank {rank} lost its connection ({errors[rank][1]}: {errors[rank][2]}): a peer left "
                          "the exchange early, for instance after fewer sends or receives than this rank")
    total = np.sum([rank_input(case, r).astype(np.float64 if dtype.startswith("float") else np.int64)
                    for r in range(n)], axis=0)
    parts = np.array_split(total, n)
    sizes = chunk_sizes(numel, n)
    itemsize = DTYPES[dtype]
    table = [TrafficRow(r, int(itemsize * (numel - sizes[r])), None) for r in range(n)]
    for r in range(n):
        outcome = outcomes.get(r)
        if outcome is None:
            raise CaseFailure(f"rank {r} returned no result")
        kind, output, sent = outcome
        if kind != "tensor":
            raise CaseFailure(f"rank {r} returned a {output}; expected (output tensor, bytes_sent) or a tensor")
        if output.ndim != 1 or output.shape[0] != sizes[r]:
            raise CaseFailure(f"rank {r} returned {output.size} elements (shape {output.shape}), expected "
                              f"{sizes[r]}: chunk {r} of {numel} elements split {n} ways as numpy.array_split "
                              "does (the first numel % N chunks get one element more)")
        if output.dtype != np.dtype(dtype):
            raise CaseFailure(f"rank {r} returned dtype {output.dtype}, expected {dtype} (the input's dtype)")
        wrong = np.flatnonzero(output != parts[r])
        if wrong.size:
            i = int(wrong[0])
            raise CaseFailure(f"rank {r} holds {output[i]:g} at element {i} of its chunk, expected {parts[r][i]:g} "
                              f"(the sum over all {n} ranks)")
        if isinstance(sent, str):
            raise CaseFailure(f"rank {r} reported bytes_sent={sent}; expected an int")
        table[r].reported = None if sent is None else int(sent)
    for row in table:
        if row.reported is not None and not row.ok:
            raise CaseFailure(f"rank {row.rank} reports {row.reported} bytes sent, expected {row.expected}: "
                              f"every chunk but its own, once, at {itemsize} bytes per {dtype} element", table)


def _run(fn, cases: list[dict]) -> dict:
    """One launch of every case; ``{case index: {rank: outcome}}``, or CaseFailure when the launch failed."""
    reference = _reference(fn)
    with tempfile.TemporaryDirectory(prefix="ringlab-03a-") as progress:
        try:
            per_rank = launch(grade_rank, GRADE_WORLD, timeout=LAUNCH_TIMEOUT_S, threads=1,
                              args=(reference, cases, CASE_TIMEOUT_S, progress))
        except LaunchTimeout as exc:
            marks = {r: Path(progress, f"rank{r}") for r in exc.ranks}
            where = {r: int(p.read_text()) for r, p in marks.items() if p.is_file()}
            if not where:
                raise _LaunchFailure(f"the {GRADE_WORLD} grading processes did not start within "
                                  f"{LAUNCH_TIMEOUT_S:g} s (a very busy machine?); try again") from None
            index = min(where.values())
            stuck = sorted(r for r, i in where.items() if i == index)
            raise _LaunchFailure(f"{_describe(cases[index])}: ranks {stuck} hung: never returned within "
                                 f"{LAUNCH_TIMEOUT_S:g} s (outside send/recv: a loop that never ends?)",
                                 cases[index]) from None
        except RankError as exc:
            raise _LaunchFailure(f"rank {exc.rank} failed before grading started: {exc.exc_type}: "
                                 f"{exc.message}") from None
    return {i: {r: per_rank[r].get(i) for r in range(case["world_size"])} for i, case in enumerate(cases)}


def _describe(case: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in case.items() if k != "seed")


def _reduce_scatter_p2p(fn) -> GradeResult:
    cases = grading_cases()
    if fn is not None and (stub := _untouched_stub(fn)) is not None:
        return GradeResult("03a", FUNCTION, NOT_ATTEMPTED, f"not attempted yet: {stub}")
    try:
        results = _run(fn, cases) if fn is not None else {}
    except CaseFailure as failure:  # _reference's refusal or a failed launch
        case = getattr(failure, "case", None) or {"world_size": GRADE_WORLD}
        return GradeResult("03a", FUNCTION, WRONG, failure.message, dict(case), [], 0)

    def check(_fn, **case):
        check_case(case, results[cases.index(case)])

    return run_grader("03a", FUNCTION, fn, check, cases,
                      passed_message=f"every rank holds its chunk of the sum at world sizes 1..{GRADE_WORLD}, "
                                     "uneven sizes included, and the bytes sent match the closed form")


EXERCISES = (
    Exercise("03a", FUNCTION,
             "Ring reduce-scatter with torch.distributed in real processes", _reduce_scatter_p2p, (
                 "Post each step's send and receive together: build two dist.P2POp (isend of the chunk you "
                 "forward, irecv into a fresh buffer) and pass both to dist.batch_isend_irecv, then wait on "
                 "every request. A blocking send first on every rank deadlocks: nobody has posted a receive.",
                 "Forward your running partial sum, not your original chunk: add what arrives into your own "
                 "copy of that chunk, and send that copy on the next step. Split with torch.tensor_split, "
                 "which gives the first numel % N chunks one element more (numel // N drops the remainder).",
                 "At step s rank r sends chunk (r - 1 - s) % N to r + 1 and adds the chunk (r - 2 - s) % N it "
                 "receives from r - 1; after N - 1 steps it holds chunk r complete. Peers in P2POp are global "
                 "ranks: dist.get_global_rank(group, group_rank).",
             )),
)
