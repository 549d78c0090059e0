"""Graders for the debugging labs: the nvidia-smi row parser (P4), the fingerprint compare (P6) and
the DDP gradient-accumulation loop (P7).

* ex12 ``parse_smi_row(line) -> dict | None``: hand-written rows with their expected dicts (real
  driver outputs: placeholders, units, messages), then rows generated from drawn values.
* ex13 ``diff_fingerprints(fingerprints) -> {rank: [field, ...]}``: expected answers from a
  direct count of each field's values.
* ex14 ``accumulate_gradients(model, micro_batches, loss_fn)``: runs in 2 gloo processes
  (:func:`ringlab.dist.launch`, about 4-5 s on 2 cores, most of it process start-up), counting
  all-reduce rounds with a DDP communication hook and comparing ``.grad`` with the gradient of
  the mean loss over the whole batch, computed in one process.
"""

from __future__ import annotations

import importlib.util
import inspect

from .engine import CaseFailure, as_number, run_grader
from .exercise import Exercise

# ---------------------------------------------------------------------------------------- ex12

SMI_METRICS = ("utilization_gpu_pct", "memory_used_mib", "memory_total_mib", "power_draw_w", "temperature_gpu_c")
H100 = ("GPU-6f2c9d8e-1a3b-4c5d-8e7f-0a1b2c3d4e5f", "NVIDIA H100 80GB HBM3")


def _gpu(index, uuid, name, *metrics):
    return {"index": index, "uuid": uuid, "name": name, **dict(zip(SMI_METRICS, metrics))}


# (line, expected): written by hand from nvidia-smi outputs, not computed by any parser
SMI_CASES = (
    ("0, GPU-6f2c9d8e-1a3b-4c5d-8e7f-0a1b2c3d4e5f, NVIDIA H100 80GB HBM3, 37, 18211, 81559, 212.53, 36",
     _gpu(0, *H100, 37.0, 18211.0, 81559.0, 212.53, 36.0)),
    ("0, GPU-6f2c9d8e-1a3b-4c5d-8e7f-0a1b2c3d4e5f, NVIDIA H100 80GB HBM3, 0, 0, 81559, 69.82, 31",
     _gpu(0, *H100, 0.0, 0.0, 81559.0, 69.82, 31.0)),
    ("0, GPU-1c2d3e4f-0000-1111-2222-333344445555, NVIDIA GB10, 3 %, [N/A], [N/A], 11.52 W, 45",
     _gpu(0, "GPU-1c2d3e4f-0000-1111-2222-333344445555", "NVIDIA GB10", 3.0, None, None, 11.52, 45.0)),
    ("7, GPU-b41d7e20-9c8f-4a6b-b5e4-3f2a1d0c9b8a, Tesla T4, 100, 15109 MiB, 15360 MiB, [Not Supported], 71",
     _gpu(7, "GPU-b41d7e20-9c8f-4a6b-b5e4-3f2a1d0c9b8a", "Tesla T4", 100.0, 15109.0, 15360.0, None, 71.0)),
    ("1, GPU-b41d7e20-9c8f-4a6b-b5e4-3f2a1d0c9b8a, NVIDIA A100-SXM4-80GB, ERR!, ERR!, 81920, ERR!, ERR!",
     _gpu(1, "GPU-b41d7e20-9c8f-4a6b-b5e4-3f2a1d0c9b8a", "NVIDIA A100-SXM4-80GB", None, None, 81920.0, None, None)),
    ("2, GPU-aa, NVIDIA GeForce RTX 4090, N/A, 512, 24564, , 40",
     _gpu(2, "GPU-aa", "NVIDIA GeForce RTX 4090", None, 512.0, 24564.0, None, 40.0)),
    ("3,GPU-bb,Quadro RTX 8000, Rev A,12,100,46080,50.5,38",
     _gpu(3, "GPU-bb", "Quadro RTX 8000, Rev A", 12.0, 100.0, 46080.0, 50.5, 38.0)),
    ("12, GPU-cc, NVIDIA L4, [Unknown Error], 0, 23034, 16.1, [N/A]",
     _gpu(12, "GPU-cc", "NVIDIA L4", None, 0.0, 23034.0, 16.1, None)),
    ("No devices were found", None),
    ("Unable to determine the device handle for GPU 0000:1B:00.0: Unknown Error", None),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
     "latest NVIDIA driver is installed and running.", None),
    ("", None),
    ("GPU 0000:1B:00.0, GPU-dd, NVIDIA H100, 1, 2, 3, 4, 5", None),
    ("0, GPU-ee, NVIDIA H100, 1, 2, 3", None),
    # not plain non-negative numbers: a sign, a second decimal point, text before the number
    ("4, GPU-ff, NVIDIA H100 80GB HBM3, -5, 1.2.3, 81559, abc 12, 40 C",
     _gpu(4, "GPU-ff", "NVIDIA H100 80GB HBM3", None, None, 81559.0, None, 40.0)),
)
PLACEHOLDERS = ("[N/A]", "[Not Supported]", "N/A", "ERR!", "[Unknown Error]", "")


def smi_cases() -> list[dict]:
    return [{"line": line} for line, _ in SMI_CASES]


def _expected_smi(line: str):
    for text, expected in SMI_CASES:
        if text == line:
            return expected
    raise KeyError(line)


def smi_strategy():
    """Rows built from drawn values: each metric a number (maybe with its unit) or a placeholder."""
    from hypothesis import strategies as st

    metric = st.one_of(st.sampled_from(PLACEHOLDERS).map(lambda p: (p, None)),
                       st.integers(0, 200000).map(lambda v: (str(v), float(v))),
                       st.integers(0, 99999).map(lambda v: (f"{v / 100:.2f}", round(v / 100, 2))))
    unit = st.sampled_from(("", " %", " MiB", " W"))

    def build(index, name, metrics, units):
        cells = [text + (u if value is not None else "") for (text, value), u in zip(metrics, units)]
        line = ", ".join([str(index), f"GPU-{index:04d}", name, *cells])
        return {"line": line, "expected": _gpu(index, f"GPU-{index:04d}", name, *(v for _, v in metrics))}

    return st.builds(build, st.integers(0, 63), st.sampled_from(("NVIDIA H100 80GB HBM3", "NVIDIA GB10", "Tesla V100")),
                     st.lists(metric, min_size=5, max_size=5), st.lists(unit, min_size=5, max_size=5))


def check_smi_row(fn, line: str, expected=KeyError) -> None:
    """ex12: the returned dict (or None) equals the expected one; placeholders are None, never 0."""
    if expected is KeyError:
        expected = _expected_smi(line)
    got = fn(line)
    if expected is None:
        if got is not None:
            raise CaseFailure(f"this line is not a GPU row and should give None, got {got!r}")
        return
    if not isinstance(got, dict):
        raise CaseFailure(f"should return a dict for this GPU row, got {got!r}")
    missing = [k for k in expected if k not in got]
    if missing:
        raise CaseFailure(f"the dict lacks the keys {missing}")
    for key, want in expected.items():
        value = got[key]
        if want is None and value is not None:
            raise CaseFailure(f"{key} should be None (the field is a placeholder or not a plain non-negative number: "
                              f"not known), got {value!r}; a placeholder must never become 0, nor a partial match "
                              "such as -5 or 1.2.3 a number")
        if want is None:
            continue
        if isinstance(want, str):
            if value != want:
                raise CaseFailure(f"{key} should be {want!r} (a str), got {value!r}")
            continue
        if value is None:
            raise CaseFailure(f"{key} should be {want!r}, got None")
        number = as_number(value, key, whole=key == "index")  # the graders' one rule: 37 and 37.0 are equal
        if number != want:
            raise CaseFailure(f"{key} should be {want!r}, got {value!r}")


# ---------------------------------------------------------------------------------------- ex13

FP_FIELDS = ("seq", "op", "shape", "dtype", "device")


def _fp(op="ALLREDUCE", shape=(4,), dtype="float32", device="cpu", seq=0):
    return {"seq": seq, "op": op, "shape": shape, "dtype": dtype, "device": device}


BARRIER = _fp("BARRIER", None, None, None)
FP_CASES = (
    [_fp(), _fp(), _fp("BROADCAST"), _fp()],                                  # P6: rank 2 broadcasts
    [_fp(shape=(25,)), _fp(shape=(25,)), _fp("BROADCAST", (1,), "int64"), _fp(shape=(25,))],
    [_fp(shape=(25,)), _fp("BROADCAST", (1,), "int64")],                      # two ranks: a tie, rank 0 wins
    [BARRIER, BARRIER, BARRIER, _fp()],                                       # rank 3 skipped the barrier
    [_fp()] * 4,
    [_fp()],
    [_fp("BROADCAST"), _fp(), _fp(), _fp()],                                  # rank 0 is the odd one out
    [_fp(shape=(2, 3)), _fp(shape=(3, 2)), _fp(shape=(2, 3))],                # same numel, other shape
    [_fp(device="cuda:0"), _fp(device="cuda:1"), _fp(device="cuda:0"), _fp(device="cuda:0")],
    [_fp(seq=5), _fp(seq=5), _fp(seq=4), _fp(seq=5), _fp(seq=6)],
    [_fp(dtype="bfloat16"), _fp(dtype="float32"), _fp(dtype="bfloat16"), _fp(dtype="float32")],  # 2-2 tie
    [_fp(), _fp("REDUCE", (8,)), _fp("ALLGATHER", dtype="float16"), _fp(), _fp()],
)


def expected_diff(fingerprints: list[dict]) -> dict[int, list[str]]:
    """Direct count per field: the reference is the most held value, ties to the lowest rank."""
    out: dict[int, list[str]] = {}
    for name in FP_FIELDS:
        values = [fp[name] for fp in fingerprints]
        best_rank, best_count = 0, -1
        for rank, value in enumerate(values):
            count = sum(1 for other in values if other == value)
            if count > best_count:  # strict: an equal count later does not replace an earlier value
                best_rank, best_count = rank, count
        for rank, value in enumerate(values):
            if value != values[best_rank]:
                out.setdefault(rank, []).append(name)
    return {rank: out[rank] for rank in sorted(out)}


def fp_strategy():
    from hypothesis import strategies as st

    fingerprint = st.builds(_fp, st.sampled_from(("ALLREDUCE", "BROADCAST", "BARRIER")),
                            st.sampled_from(((4,), (25,), (1,), (2, 3), None)),
                            st.sampled_from(("float32", "int64", None)), st.sampled_from(("cpu", "cuda:0")),
                            st.integers(0, 2))
    return st.fixed_dictionaries({"fingerprints": st.lists(fingerprint, min_size=1, max_size=6)})


def check_diff(fn, fingerprints: list[dict]) -> None:
    """ex13: the learner's {rank: fields} equals the direct count's."""
    expected = expected_diff(fingerprints)
    got = fn([dict(fp) for fp in fingerprints])
    if not isinstance(got, dict):
        raise CaseFailure(f"should return a dict {{rank: [field, ...]}}, got {type(got).__name__}")
    try:
        got = {int(r): list(f) for r, f in got.items()}
    except (TypeError, ValueError):
        raise CaseFailure(f"should map int ranks to lists of field names, got {got!r}") from None
    if got == expected:
        return
    ranks = sorted(set(got) | set(expected))
    for rank in ranks:  # a wrongly accused rank first: it says the reference itself is off
        extra = [f for f in got.get(rank, []) if f not in expected.get(rank, [])]
        if extra:
            raise CaseFailure(f"you report rank {rank} as differing in {extra}, but it holds the majority value "
                              f"there (expected {expected})")
    for rank in ranks:
        want, have = expected.get(rank, []), got.get(rank, [])
        absent = [f for f in want if f not in have]
        if absent:
            raise CaseFailure(f"rank {rank} differs from the majority in {absent}, you did not report it "
                              f"(expected {expected}, got {got})")
    raise CaseFailure(f"fields should be listed in the order {list(FP_FIELDS)}: expected {expected}, got {got}")


# ---------------------------------------------------------------------------------------- ex14

ACCUM_KS = (1, 2, 3, 4, 5, 6)
ACCUM_LAYOUTS = ("one bucket", "one bucket per parameter")


def accum_cases() -> list[dict]:
    return [{"k": k, "layout": layout} for layout in ACCUM_LAYOUTS for k in ACCUM_KS]


def _load_by_path(path: str, name: str):
    spec = importlib.util.spec_from_file_location("ringlab_graded_ex14", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def _accum_rank(path: str, name: str, cases: list[dict], seed: int = 0) -> list[dict]:
    """Body of each grading rank: one record per case (counts, checksums, error)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from ringlab.labs.grad_accum import (BUCKET_LAYOUTS, AllReduceCounter, flat_grad, full_batch_gradient,
                                         make_batches, make_model, mse)

    fn = _load_by_path(path, name)
    rank, world_size = dist.get_rank(), dist.get_world_size()
    records = []
    for layout in ACCUM_LAYOUTS:
        ddp = DDP(make_model(seed), bucket_cap_mb=BUCKET_LAYOUTS[layout])
        counter = AllReduceCounter.install(ddp)
        inside = {"forwards": 0, "in_no_sync": 0}

        def count_forward(module, args, inside=inside):
            inside["forwards"] += 1
            inside["in_no_sync"] += not module.require_backward_grad_sync

        ddp.register_forward_pre_hook(count_forward)
        reference = make_model(seed)
        for case in cases:
            if case["layout"] != layout:
                continue
            x, y = make_batches(seed + 7 * case["k"], world_size, case["k"])
            ddp.zero_grad(set_to_none=True)
            counter.reset()
            inside.update(forwards=0, in_no_sync=0)
            record = {**case, "error": None}
            try:
                fn(ddp, list(zip(x[rank], y[rank])), mse)
            except NotImplementedError as exc:
                record["error"] = ("NotImplementedError", str(exc))
            except Exception as exc:  # noqa: BLE001 - reported to the learner
                record["error"] = (type(exc).__name__, str(exc))
            if record["error"] is None:
                if any(p.grad is None for p in ddp.module.parameters()):
                    record["error"] = ("missing", "some parameters have no .grad after your function")
                else:
                    got = flat_grad(ddp.module).detach().clone()
                    record.update(rounds=counter.rounds, calls=len(counter.calls), got=got,
                                  expected=full_batch_gradient(reference, x, y).detach().clone(), **inside)
            records.append(record)
    return records


def _run_accumulation(fn) -> dict:
    """Grade every ex14 case in one launch; ``{(k, layout): record}`` or CaseFailure."""
    from ringlab.dist import LaunchTimeout, RankError, launch

    path = inspect.getsourcefile(fn) if inspect.isfunction(fn) else None
    if path is None or fn.__name__ == "<lambda>" or fn.__qualname__ != fn.__name__:
        raise CaseFailure("accumulate_gradients must be a module-level function in a .py file "
                          "(the grader imports it in 2 new processes)")
    try:
        per_rank = launch(_accum_rank, 2, timeout=45.0, args=(path, fn.__name__, accum_cases()), threads=1)
    except LaunchTimeout:
        raise CaseFailure("the 2 ranks did not finish within 45 s: a rank may be waiting for an all-reduce "
                          "the other never starts (do both ranks call the model the same number of times?)") from None
    except RankError as exc:
        raise CaseFailure(f"rank {exc.rank} failed: {exc.exc_type}: {exc.message}") from None
    return {(rec["k"], rec["layout"]): (rec, per_rank[1][i]) for i, rec in enumerate(per_rank[0])}


def check_accumulation(results: dict, k: int, layout: str) -> None:
    """ex14: one round per step, ranks agree, gradients equal the full-batch gradient (float32 tolerance)."""
    rec, other = results[(k, layout)]
    if rec["error"]:
        kind, message = rec["error"]
        if kind == "NotImplementedError":
            raise NotImplementedError(message)
        raise CaseFailure(f"rank 0 raised {kind}: {message}" if kind != "missing" else message)
    if rec["rounds"] != 1:
        outside = rec["forwards"] - rec["in_no_sync"]
        why = (f"{outside} of {rec['forwards']} forwards ran outside no_sync(): DDP decides at forward time "
               "whether the next backward all-reduces, so the first K-1 forwards AND backwards must run "
               "inside model.no_sync()") if rec["in_no_sync"] < k - 1 else "use model.no_sync() for the first K-1"
        if rec["rounds"] == 0:
            why = "the last micro-batch's forward and backward must run outside no_sync() so that it syncs"
        raise CaseFailure(f"{rec['rounds']} gradient all-reduce rounds ({rec['calls']} bucket all-reduces) "
                          f"in one step, expected 1: {why}")
    import torch

    if not torch.equal(rec["got"], other["got"]):
        raise CaseFailure("ranks 0 and 1 hold different gradients after the step")
    got, want = rec["got"], rec["expected"]
    if not torch.allclose(got, want, rtol=1e-4, atol=1e-6):
        ratio = float(got.norm() / want.norm())
        if abs(ratio - k) < 1e-3 * k and k > 1:
            raise CaseFailure(f"gradients are {k} times the full-batch gradient: scale each micro-batch loss by 1/K")
        world_size = 2  # the grader's two ranks
        if abs(ratio - 1 / world_size) < 1e-3:
            raise CaseFailure(f"gradients are 1/{world_size} of the full-batch gradient (norm ratio {ratio:.4g}): DDP "
                              "already averages over ranks (it divides the all-reduced sum by world_size), so a loss "
                              "divided by K x world_size is divided by world_size twice; divide by K only")
        i = int((got - want).abs().argmax())
        raise CaseFailure(f"gradient element {i} is {got[i].item():.6g}, the full-batch gradient has "
                          f"{want[i].item():.6g} (norm ratio {ratio:.4g})")


def _smi(fn):
    return run_grader("ex12", "parse_smi_row", fn, check_smi_row, smi_cases(), smi_strategy(),
                      "every row parsed; placeholders are None, never 0; messages give None")


def _fingerprints(fn):
    return run_grader("ex13", "diff_fingerprints", fn, check_diff, [{"fingerprints": c} for c in FP_CASES],
                      fp_strategy(), "every differing rank and field found, nothing more")


def _accumulation(fn):
    if fn is None:
        return run_grader("ex14", "accumulate_gradients", None, None, [])
    try:  # an untouched stub raises at once: say so without starting 2 processes (~10 s)
        fn(None, [], None)
    except NotImplementedError:
        return run_grader("ex14", "accumulate_gradients", fn, lambda _fn, **case: _fn(None, [], None), [{}])
    except Exception:  # noqa: BLE001 - a real attempt fails on these dummy arguments; grade it for real
        pass
    try:
        results = _run_accumulation(fn)
    except CaseFailure as failure:
        reason = failure  # the except clause unbinds its name; the grader below calls check later

        def check(_fn, **case):
            raise reason

        return run_grader("ex14", "accumulate_gradients", fn, check, accum_cases()[:1])
    return run_grader("ex14", "accumulate_gradients", fn, lambda _fn, **case: check_accumulation(results, **case),
                      accum_cases(), passed_message="one all-reduce round per step at every K and bucket layout; "
                                                    "gradients equal the full-batch gradient")


EXERCISES = (
    Exercise("ex12", "ex12_smi_row_parser", "parse_smi_row", "Parse an nvidia-smi CSV row", "P4", _smi, (
        "Split on commas and strip spaces; a GPU row has 8 fields and starts with a whole-number index. "
        "Anything else (No devices were found, driver errors) is not a GPU row.",
        "[N/A], [Not Supported], ERR! and empty fields mean 'not known': return None, never 0, or a plot "
        "and every average over the log would show a GPU with no memory in use.",
        "A metric may carry a unit ('3 %', '81559 MiB'): keep the number before it. The name may contain "
        "commas: it is everything between the uuid and the last five fields.",
    )),
    Exercise("ex13", "ex13_fingerprint_compare", "diff_fingerprints", "Who is running a different collective?",
             "P6", _fingerprints, (
                 "Treat each field on its own: the reference value of a field is the one most ranks hold.",
                 "Comparing everything with rank 0 fails when rank 0 is the odd one out: then every other "
                 "rank looks wrong.",
                 "Shapes (2, 3) and (3, 2) have the same number of elements and still differ; compare the "
                 "tuples. On a tie, take the value of the lowest rank among the tied ones.",
             )),
    Exercise("ex14", "ex14_grad_accumulation", "accumulate_gradients", "Gradient accumulation with DDP no_sync",
             "P7", _accumulation, (
                 "Without no_sync, DDP all-reduces after every backward: K rounds per step instead of 1.",
                 "DDP decides during the FORWARD whether the next backward syncs: put forward and backward "
                 "of the first K-1 micro-batches inside `with model.no_sync():`, the last one outside.",
                 "The full-batch loss is the mean over all samples: divide each micro-batch loss by K, or "
                 "the gradients come out K times too large.",
             )),
)
