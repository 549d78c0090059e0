"""Grader for topic 11, gradient accumulation with DDP (card 11).

* 11a ``accumulate_gradients(model, micro_batches, loss_fn)``: runs in 2 gloo processes
  (:func:`ringlab.dist.launch`, about 4-5 s on 2 cores, most of it process start-up), counting
  all-reduce rounds with a DDP communication hook and comparing ``.grad`` with the gradient of
  the mean loss over the whole batch, computed in one process.
"""

from __future__ import annotations

import importlib.util
import inspect

from ringlab.dist import LaunchTimeout, RankError, launch
from ringlab.labs.grad_accum import (
    BUCKET_LAYOUTS,
    AllReduceCounter,
    flat_grad,
    full_batch_gradient,
    make_batches,
    make_model,
    mse,
)

from ..engine import CaseFailure, run_grader
from ..exercise import Exercise

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
    """Grade every 11a case in one launch; ``{(k, layout): record}`` or CaseFailure."""
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
    """11a: one round per step, ranks agree, gradients equal the full-batch gradient (float32 tolerance)."""
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


def _accumulation(fn):
    if fn is None:
        return run_grader("11a", "accumulate_gradients", None, None, [])
    try:  # an untouched stub raises at once: say so without starting 2 processes (~10 s)
        fn(None, [], None)
    except NotImplementedError:
        return run_grader("11a", "accumulate_gradients", fn, lambda _fn, **case: _fn(None, [], None), [{}])
    except Exception:  # noqa: BLE001 - a real attempt fails on these dummy arguments; grade it for real
        pass
    try:
        results = _run_accumulation(fn)
    except CaseFailure as failure:
        reason = failure  # the except clause unbinds its name; the grader below calls check later

        def check(_fn, **case):
            raise reason

        return run_grader("11a", "accumulate_gradients", fn, check, accum_cases()[:1])
    return run_grader("11a", "accumulate_gradients", fn, lambda _fn, **case: check_accumulation(results, **case),
                      accum_cases(), passed_message="one all-reduce round per step at every K and bucket layout; "
                                                    "gradients equal the full-batch gradient")


EXERCISES = (
    Exercise("11a", "accumulate_gradients", "Gradient accumulation with DDP no_sync", _accumulation, (
                 "Without no_sync, DDP all-reduces after every backward: K rounds per step instead of 1.",
                 "DDP decides during the FORWARD whether the next backward syncs: put forward and backward "
                 "of the first K-1 micro-batches inside `with model.no_sync():`, the last one outside.",
                 "The full-batch loss is the mean over all samples: divide each micro-batch loss by K, or "
                 "the gradients come out K times too large.",
             )),
)
