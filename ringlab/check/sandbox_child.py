"""The process that runs a learner's code for ``ringlab check`` (started by :mod:`ringlab.check.isolated`).

Run by path (``python -P .../sandbox_child.py PARENT_PID FD READ_ONLY_JSON FILE EXERCISE``), not with ``-m``,
so that its first lines run before any import starts a thread: the kernel kills it with its parent
(``PR_SET_PDEATHSIG``), and on Linux it enters a new user and mount namespace where ``READ_ONLY_JSON``'s
folders (the repository, the learner's folder) are read-only, then a second pair of namespaces that
locks those mounts so the code cannot unmount them. Then it imports its own machinery and the modules
the learner's file imports at top level, says ``ready`` (the parent's clock starts), imports the
learner's file (a copy, in a scratch folder that is the working directory) and serves the parent's
calls of the learner's function (an ``async def`` one runs to completion on an event loop of its own, and the
parent receives :func:`ringlab.check.aio.run_async`'s report). It never grades: the verdict is computed in the
parent.
"""

import ctypes
import json
import os
import signal
import sys

_CLONE_NEWNS, _CLONE_NEWUSER = 0x00020000, 0x10000000
_MS_RDONLY, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18
# statvfs flags that a remount inside a user namespace must keep (the kernel locks them): ST_* -> MS_*
_LOCKED = {2: 2, 4: 4, 8: 8, 1024: 1024, 2048: 2048, 4096: 1 << 21}
_PR_SET_PDEATHSIG = 1


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent ends; exit now if the parent already has."""
    if sys.platform.startswith("linux"):
        try:
            prctl = _libc().prctl
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            # a process the learner's code forks dies with this one (the kernel clears the setting on fork)
            os.register_at_fork(after_in_child=lambda: prctl(_PR_SET_PDEATHSIG, signal.SIGKILL))
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:
        os._exit(1)


def _map_ids(uid: int, gid: int) -> None:
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def make_read_only(paths: list[str]) -> str:
    """Remount ``paths`` read-only for this process and its children; '' on success, else the reason."""
    if not sys.platform.startswith("linux"):
        return f"not available on {sys.platform}"
    libc = _libc()
    uid, gid = os.getuid(), os.getgid()

    def unshare() -> None:
        if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "unshare")
        _map_ids(uid, gid)

    def mount(src, target, flags) -> None:
        if libc.mount(src, target, None, flags, None) != 0:
            raise OSError(ctypes.get_errno(), f"mount {target}")

    try:
        unshare()
        mount(None, b"/", _MS_REC | _MS_PRIVATE)
        for path in paths:
            target = os.fsencode(path)
            keep = sum(ms for st, ms in _LOCKED.items() if os.statvfs(path).f_flag & st)
            mount(target, target, _MS_BIND | _MS_REC)
            mount(None, target, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | keep)
        unshare()  # a namespace owned by a less privileged one: the read-only flags are locked in it
    except OSError as exc:
        return f"{exc.filename or 'namespaces'}: {os.strerror(exc.errno) if exc.errno else exc}"
    return ""


def _top_level_imports(path: str) -> list[str]:
    """Absolute module names the file imports at its top level (its own code is not run)."""
    import ast

    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return []
    names = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def main(parent_pid: int, fd: int, read_only_json: str, file: str, exercise_id: str) -> None:
    die_with_parent(parent_pid)
    jail = make_read_only(json.loads(read_only_json))
    import importlib
    import inspect
    import socket
    import threading

    from ringlab.check import wire
    from ringlab.check.loader import load

    sock = socket.socket(fileno=fd)
    peer = wire.Peer(sock, serves=frozenset(wire._OPS), remote_serves=frozenset({"call"}),
                     trusts_peer=True)

    def on_exit(exc: BaseException, stage: str = "while being graded") -> None:
        code = exc.code if isinstance(exc, SystemExit) else type(exc).__name__
        try:
            peer.send(("exit", repr(code)[:200], stage))
        finally:
            os._exit(0)

    peer.on_base_exception = on_exit

    for name in _top_level_imports(file):  # library imports: their time is not the learner's
        try:
            importlib.import_module(name)
        except BaseException:  # noqa: BLE001 - the learner's import will report it
            pass
    peer.send(("ready", jail))
    threading.Thread(target=peer.run_reader, daemon=True).start()
    try:
        fn = load(exercise_id, file)
    except (SystemExit, KeyboardInterrupt) as exc:
        on_exit(exc, "while being imported")
    except BaseException as exc:  # noqa: BLE001 - a broken file: the parent words it
        peer.send(("loaded", False, (type(exc).__name__, str(exc)[:20_000])))
    else:
        code = getattr(fn, "__code__", None)
        info = (getattr(fn, "__name__", ""), getattr(fn, "__qualname__", ""),
                code.co_firstlineno if code is not None else 0)
        if inspect.iscoroutinefunction(fn):  # an async exercise (19a): the parent gets a report, never a coroutine
            from ringlab.check.aio import blocking

            fn = blocking(fn)
        peer.send(("loaded", True, (peer.encode(fn), type(fn).__name__ == "function", info)))
    threading.Event().wait()  # serve until the parent ends this process


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
