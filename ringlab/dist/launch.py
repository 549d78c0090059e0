"""Start ``world_size`` local processes in one process group, run a function in each, collect results.

The parent opens the rendezvous store itself (``torch.distributed.TCPStore`` on 127.0.0.1,
port 0, so the OS picks a free port and no other program can take it between choosing and
binding). Children are started with the ``spawn`` method (safe with threads and CUDA), join
the store, call ``init_process_group`` and run ``fn``. Each child answers through its own pipe:
its pickled return value (after leaving the process group), or its exception type, message
and traceback. A closed pipe without an answer means the rank died. The parent reports the
first failure at once, raises when ``timeout`` passes, and in every case, success included,
ends by killing whatever children are still alive, so nothing outlives the call: SIGTERM (and
Ctrl-C) during a launch raise :class:`LaunchInterrupted` in the parent after the children are
killed, and on Linux each child asks the kernel to kill it if the parent dies (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from multiprocessing import connection

from ringlab.sim.memory import available_bytes

from .executor import torch_modules

HOST = "127.0.0.1"


class RankError(RuntimeError):
    """A rank of :func:`launch` raised, or exited without returning.

    Attributes: ``rank`` (int), ``exc_type`` (name of the exception class, or ``"exit"``),
    ``message`` (str), ``remote_traceback`` (the rank's formatted traceback, may be empty).
    """

    def __init__(self, rank: int, exc_type: str, message: str, remote_traceback: str = ""):
        self.rank, self.exc_type, self.message, self.remote_traceback = rank, exc_type, message, remote_traceback
        text = f"rank {rank} failed: {exc_type}: {message}"
        if remote_traceback:
            text += f"\n--- traceback of rank {rank} ---\n{remote_traceback.rstrip()}"
        super().__init__(text)


class LaunchTimeout(TimeoutError):
    """:func:`launch` ran past its timeout; ``ranks`` lists the ranks that had not answered (all were killed)."""

    def __init__(self, ranks: list[int], timeout: float):
        self.ranks, self.timeout = ranks, timeout
        super().__init__(f"ranks {ranks} did not finish within timeout={timeout} s; all ranks were killed")


class LaunchInterrupted(KeyboardInterrupt):
    """SIGTERM or SIGINT reached the parent during :func:`launch`; every rank was killed. ``signum`` says which."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"stopped by {signal.Signals(signum).name}; every rank was killed")


RANK_MEMORY_BYTES = 600 * 2**20  # a rank's resident torch + gloo before any message (measured ~450 MiB)
RANKS_PER_CORE = 4  # beyond this the ranks spend their time descheduled, not communicating


def max_local_ranks(backend: str = "gloo", message_bytes: int = 0) -> int:
    """Most ranks this machine can run at once: nccl, one per visible GPU; gloo, ``RANKS_PER_CORE`` per
    CPU core and as many as available memory holds at ``RANK_MEMORY_BYTES`` plus 4 buffers of
    ``message_bytes`` each (input, output, and the two of ringlab's ring)."""
    if backend == "nccl":
        torch, _ = torch_modules()
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    by_cores = RANKS_PER_CORE * (os.cpu_count() or 1)
    free = available_bytes()
    if free is None:
        return by_cores
    return max(0, min(by_cores, free // (RANK_MEMORY_BYTES + 4 * message_bytes)))


def _die_with_parent() -> None:
    """Linux: have the kernel SIGKILL this process when its parent exits (the launcher was killed)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before the call above
        os._exit(1)


@contextlib.contextmanager
def _interrupt_on_signals():
    """While launching, turn SIGTERM and SIGINT into :class:`LaunchInterrupted` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, _frame):
        raise LaunchInterrupted(signum)

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _worker(fn, rank, world_size, backend, port, timeout, threads, args, kwargs, conn) -> None:
    """Body of one child process: join the group, run ``fn``, send back its result or its error."""
    _die_with_parent()
    os.environ.update(MASTER_ADDR=HOST, MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size),
                      LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world_size))
    try:
        torch, dist = torch_modules()
        torch.set_num_threads(threads)
        if backend == "nccl":
            torch.cuda.set_device(rank % torch.cuda.device_count())
        limit = datetime.timedelta(seconds=timeout)
        store = dist.TCPStore(HOST, port, world_size, is_master=False, timeout=limit)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=limit)
        payload = pickle.dumps(fn(*args, **kwargs))  # pickle here so an unpicklable result is this rank's error
        # Tear down before answering: once the parent has every answer it may kill the
        # processes instead of waiting for torch's slow interpreter shutdown.
        dist.destroy_process_group()
        answer = (True, payload)
    except BaseException as exc:  # noqa: BLE001 - every failure, SystemExit included, goes to the parent
        answer = (False, (type(exc).__name__, str(exc), traceback.format_exc()))
    sys.stdout.flush()
    sys.stderr.flush()
    conn.send_bytes(pickle.dumps(answer))
    conn.close()


def _check_picklable(fn) -> None:
    """Spawned children import ``fn`` by name: refuse what they could not find, before starting anything."""
    if getattr(fn, "__module__", None) == "__main__" and not hasattr(sys.modules["__main__"], "__file__"):
        raise TypeError(f"fn={getattr(fn, '__name__', fn)!r} is defined in an interactive session (notebook "
                        "cell or REPL); spawned processes cannot import it. Put it in a .py module and import it.")
    try:
        pickle.dumps(fn)
    except Exception as exc:
        raise TypeError(f"fn must be a module-level function that child processes can import; "
                        f"pickling it failed: {exc}") from exc


def launch(fn, world_size: int, backend: str = "gloo", timeout: float = 60.0, args: tuple = (),
           kwargs: dict | None = None, threads: int | None = None) -> list:
    """Run ``fn(*args, **kwargs)`` in ``world_size`` new processes forming one process group.

    Inside ``fn`` the default group is initialised (``rank``/``world_size`` from
    ``torch.distributed``; ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``,
    ``LOCAL_RANK`` are set as torchrun sets them), so code written for torchrun runs unchanged.

    Args:
        fn: module-level (importable) function; its return value must be picklable (return CPU data).
        world_size: number of processes, 1 to :func:`max_local_ranks` (backend).
        backend: ``"gloo"`` (CPU tensors) or ``"nccl"`` (CUDA; rank r uses GPU ``r % device_count``).
        timeout: seconds for the whole launch, start-up included; also the process-group timeout.
        args, kwargs: passed to ``fn`` in every rank (pickled).
        threads: torch intra-op threads per process; default ``max(1, cpu_count // world_size)``
            so the ranks do not oversubscribe the cores.

    Returns:
        ``[fn's return value on rank 0, on rank 1, ...]``.

    Raises:
        RankError: a rank raised (the first one to report, with its traceback) or died without answering.
        LaunchTimeout: ``timeout`` passed first (a :class:`TimeoutError`). Either way every child is killed.
        LaunchInterrupted: SIGTERM or SIGINT arrived (a :class:`KeyboardInterrupt`); every child is killed.
        ValueError / TypeError: bad arguments, ``fn`` not importable, nccl without enough GPUs.
    """
    torch, dist = torch_modules()
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
    if backend == "nccl" and (not torch.cuda.is_available() or torch.cuda.device_count() < 1):
        raise ValueError("backend='nccl' needs CUDA GPUs; none is visible here (use backend='gloo' on CPU)")
    limit = max_local_ranks(backend)
    if world_size > limit:
        why = ("one per visible GPU" if backend == "nccl" else
               f"{RANKS_PER_CORE} per CPU core, {RANK_MEMORY_BYTES // 2**20} MiB of available memory each")
        raise ValueError(f"world_size={world_size} is more ranks than this machine can run with {backend}: "
                         f"at most {limit} ({why})")
    _check_picklable(fn)
    threads = threads or max(1, (os.cpu_count() or 1) // world_size)

    ctx = multiprocessing.get_context("spawn")
    deadline = time.monotonic() + timeout
    store = dist.TCPStore(HOST, 0, world_size, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=timeout))
    procs, conns = [], []
    with _interrupt_on_signals():
        try:
            return _start_and_collect(ctx, procs, conns, fn, world_size, backend, store, timeout, threads, args,
                                      kwargs, deadline)
        finally:  # every rank has answered (and left its group) or something failed: stop them all now
            for proc in procs:
                if proc.is_alive():
                    proc.kill()
            for proc in procs:
                proc.join(10.0)
            for conn in conns:
                conn.close()
            del store


def _start_and_collect(ctx, procs, conns, fn, world_size, backend, store, timeout, threads, args, kwargs, deadline):
    """Start the ranks (appending to ``procs`` and ``conns`` as they start) and return their results in order."""
    for rank in range(world_size):
        parent_end, child_end = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_worker, daemon=True, name=f"ringlab-rank{rank}",
                           args=(fn, rank, world_size, backend, store.port, timeout, threads, args,
                                 kwargs or {}, child_end))
        proc.start()
        child_end.close()  # so EOF on parent_end means the child is gone
        procs.append(proc)
        conns.append(parent_end)
    results = _collect(procs, conns, deadline, timeout)
    return [results[r] for r in range(world_size)]


def _collect(procs, conns, deadline: float, timeout: float) -> dict:
    """Wait for every rank's answer; raise on the first error, silent death, or the deadline."""
    results: dict[int, object] = {}
    rank_of = {id(c): r for r, c in enumerate(conns)}
    while len(results) < len(procs):
        pending = [c for r, c in enumerate(conns) if r not in results]
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise LaunchTimeout(sorted(rank_of[id(c)] for c in pending), timeout)
        for conn in connection.wait(pending, timeout=remaining):
            rank = rank_of[id(conn)]
            try:
                ok, payload = pickle.loads(conn.recv_bytes())
            except EOFError:  # the child closed its end without a word: it died
                procs[rank].join(1.0)
                raise RankError(rank, "exit", f"process exited with code {procs[rank].exitcode} "
                                              "without returning a result") from None
            if not ok:
                raise RankError(rank, *payload)
            results[rank] = pickle.loads(payload)
    return results
