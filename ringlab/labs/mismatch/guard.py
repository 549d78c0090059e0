"""The guard: before each collective every rank all-gathers its :class:`Fingerprint` on a separate gloo
group and raises :class:`CollectiveMismatchError` on every rank when they differ (needs torch)."""

from __future__ import annotations

import datetime

from ringlab.optional import require_torch

from .fingerprint import CollectiveMismatchError, Fingerprint, compare_fingerprints


class CollectiveTimeoutError(TimeoutError):
    """Not every rank reached the guard's fingerprint exchange within its timeout (one skipped all
    remaining guarded collectives, hangs in other work, or died); nothing was run."""


class CollectiveGuard:
    """Wrap the collectives of ``group`` so that ranks check they agree before each one runs.

    Before each call the guard all-gathers a :class:`Fingerprint` (its own call counter ``seq``,
    op, shape, dtype, device) over a separate gloo group created with ``timeout`` (seconds), so it
    works whatever the backend of ``group`` (gloo or nccl) and costs one small CPU exchange per
    collective. If the fingerprints differ, every rank raises the same
    :class:`CollectiveMismatchError` and none runs the collective; if the exchange itself does
    not complete in time, that rank raises :class:`CollectiveTimeoutError` instead of hanging.

    Creating a guard calls ``torch.distributed.new_group``, which every rank of the default group
    must call, in the same order. Use it as a context manager (``with CollectiveGuard() as g:``)
    or call :meth:`close`. Methods mirror ``torch.distributed``: :meth:`all_reduce`,
    :meth:`broadcast`, :meth:`barrier`, :meth:`all_gather`, :meth:`reduce`; :meth:`check` guards a
    call of your own. Raises ValueError for a non-positive timeout.
    """

    def __init__(self, group=None, timeout: float = 30.0):
        _, dist = require_torch(__name__)
        if not timeout or timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        self.group, self.timeout, self.seq = group, float(timeout), 0
        ranks = None if group is None else dist.get_process_group_ranks(group)
        self._exchange = dist.new_group(ranks=ranks, backend="gloo", timeout=datetime.timedelta(seconds=timeout))

    def check(self, op: str, tensor=None) -> Fingerprint:
        """Exchange fingerprints for the next collective; return this rank's when all ranks agree."""
        _, dist = require_torch(__name__)
        mine = Fingerprint.of(self.seq, op, tensor)
        gathered: list = [None] * dist.get_world_size(self._exchange)
        try:
            dist.all_gather_object(gathered, mine.as_dict(), group=self._exchange)
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CollectiveTimeoutError(
                f"collective #{mine.seq} ({op}): not every rank reached the guard within {self.timeout:g} s; "
                f"a rank skipped it and every later guarded call, is stuck elsewhere, or died ({first})") from exc
        fingerprints = [Fingerprint(**{**fp, "shape": None if fp["shape"] is None else tuple(fp["shape"])})
                        for fp in gathered]
        self.seq += 1
        if compare_fingerprints(fingerprints):
            raise CollectiveMismatchError(fingerprints)
        return mine

    def all_reduce(self, tensor, op=None):
        _, dist = require_torch(__name__)
        self.check("ALLREDUCE", tensor)
        return dist.all_reduce(tensor, op=op or dist.ReduceOp.SUM, group=self.group)

    def broadcast(self, tensor, src: int):
        _, dist = require_torch(__name__)
        self.check("BROADCAST", tensor)
        return dist.broadcast(tensor, src=src, group=self.group)

    def barrier(self):
        _, dist = require_torch(__name__)
        self.check("BARRIER")
        return dist.barrier(group=self.group)

    def all_gather(self, tensor_list, tensor):
        _, dist = require_torch(__name__)
        self.check("ALLGATHER", tensor)
        return dist.all_gather(tensor_list, tensor, group=self.group)

    def reduce(self, tensor, dst: int, op=None):
        _, dist = require_torch(__name__)
        self.check("REDUCE", tensor)
        return dist.reduce(tensor, dst=dst, op=op or dist.ReduceOp.SUM, group=self.group)

    def close(self) -> None:
        """Destroy the exchange group (collective too: every rank should close its guard)."""
        _, dist = require_torch(__name__)
        if self._exchange is not None:
            dist.destroy_process_group(self._exchange)
            self._exchange = None

    def __enter__(self) -> CollectiveGuard:
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:  # after a failure the peers may be gone: a collective teardown could hang
            self.close()
