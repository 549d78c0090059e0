"""Run a learner's ``async def`` to completion, and see what it left running.

A grader cannot ``await`` in a notebook cell (Jupyter's own loop is already running there) nor over the
sandbox's channel (a coroutine is not data), so both run the coroutine the same way: :func:`run_async`, on
a fresh event loop in a thread of its own. The report says what the coroutine returned or raised and
which of the tasks it started were still pending at that moment, the evidence for "tasks still running
after cancel": a correct ``TaskGroup`` (or ``gather`` followed by awaiting the cancelled tasks) leaves none.
Those tasks are then cancelled and given :data:`CLEANUP_S` seconds to finish, and the loop is closed.
"""

from __future__ import annotations

import asyncio
import inspect
import threading

REPORT = "ringlab_async_report"  # the key that marks a report made by the sandbox's child (see blocking)
CLEANUP_S = 5.0  # seconds for leftover tasks to finish once cancelled; a task that ignores it is abandoned
MAX_NAMED = 5  # leftover tasks named in a report


def _describe(task: asyncio.Task) -> str:
    coro = task.get_coro()
    name = getattr(coro, "__qualname__", None) or type(coro).__name__
    return f"{name} (cancelled, not yet finished)" if task.cancelling() else name


def run_async(fn, *args, **kwargs) -> dict:
    """Call ``fn(*args, **kwargs)``, an ``async def`` function, and run what it returns to completion.

    When ``fn`` is the sandbox's forwarder of a function that :func:`blocking` wrapped in the child, its call
    returns the child's report, which is passed on as it is.

    Returns ``{"value": its result or None, "error": the exception it raised or None, "pending": [names of
    the tasks still pending when it finished, at most MAX_NAMED], "pending_count": int}``. A function that
    does not return an awaitable is reported as a TypeError in ``error``. SystemExit and KeyboardInterrupt
    raised inside the coroutine are re-raised here, after the clean-up.
    """
    box: dict = {REPORT: True, "value": None, "error": None, "pending": [], "pending_count": 0}
    escape: list[BaseException] = []

    def main() -> None:
        loop = asyncio.new_event_loop()
        try:
            awaitable = fn(*args, **kwargs)
            if isinstance(awaitable, dict) and awaitable.get(REPORT) is True:  # run in the sandbox's child already
                box.update(awaitable)
                return
            if not inspect.isawaitable(awaitable):
                box["error"] = TypeError(f"{getattr(fn, '__name__', 'the function')} must be an async function "
                                         f"(async def) returning a coroutine; it returned {type(awaitable).__name__}")
                return
            main_task = loop.create_task(_as_coroutine(awaitable))
            try:
                box["value"] = loop.run_until_complete(main_task)
            except (SystemExit, KeyboardInterrupt) as exc:
                escape.append(exc)
            except BaseException as exc:  # noqa: BLE001 - CancelledError too: it is what the learner raised
                box["error"] = exc
            left = [t for t in asyncio.all_tasks(loop) if not t.done()]
            box["pending"] = [_describe(t) for t in left[:MAX_NAMED]]
            box["pending_count"] = len(left)
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.wait(left, timeout=CLEANUP_S))
            loop.run_until_complete(loop.shutdown_asyncgens())
        except (SystemExit, KeyboardInterrupt) as exc:
            escape.append(exc)
        except BaseException as exc:  # noqa: BLE001 - calling fn itself raised
            box["error"] = exc
        finally:
            loop.close()

    thread = threading.Thread(target=main, name="ringlab-check-async", daemon=True)
    thread.start()
    thread.join()
    if escape:
        raise escape[0]
    return box


async def _as_coroutine(awaitable):
    return await awaitable


def blocking(fn):
    """``fn`` (an ``async def``) as a plain function returning :func:`run_async`'s report: what the sandbox's
    child serves for an async exercise, so the parent receives data, never a coroutine."""

    def call(*args, **kwargs):
        return run_async(fn, *args, **kwargs)

    call.__name__, call.__qualname__, call.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    call.__ringlab_async__ = True
    return call
