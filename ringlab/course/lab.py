"""How the course opens in JupyterLab: the repository root served, the start page open.

This is the one home of the command line that ``make lab`` runs (``python -m ringlab.course.lab``) and that
the browser tests start their server with (:func:`lab_argv` plus their own options: port, no token). Serving
the root rather than ``notebooks/`` puts ``exercises/`` and ``solutions/`` in JupyterLab's file browser next
to the notebooks, so a learner edits an exercise file in the same window that grades it.

``python -m ringlab.course.lab [JUPYTER OPTIONS...]`` finds the repository root (the current folder or the
first parent holding :data:`START_PAGE`), then replaces itself with ``jupyter-lab`` from the same
environment; options after it go to ``jupyter-lab`` unchanged (``--no-browser``, ``--port=8890``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

START_PAGE = "notebooks/00_start_here.ipynb"  # relative to the served root
# Kept out of the file browser: jupyter_server's own defaults, plus the build metadata that an editable
# install (make install) leaves at the root, which a learner has no use for.
HIDDEN = ["__pycache__", "*.pyc", "*.pyo", ".DS_Store", "*~", "*.egg-info"]


def lab_argv(root: str | os.PathLike, *extra: str, executable: str | None = None) -> list[str]:
    """The ``jupyter-lab`` command line serving ``root`` with :data:`START_PAGE` open, then ``extra``.

    ``root`` must hold :data:`START_PAGE` (a ValueError says which file is missing). ``executable`` defaults
    to the ``jupyter-lab`` next to this Python. ``--allow-root`` is added when running as root (containers,
    CI), where JupyterLab otherwise refuses to start. The start page is named twice: as the file to open
    (a launched browser opens it) and as the default URL, so the address JupyterLab prints, and ``/``,
    lead to it too when no browser is launched (``--no-browser``, a remote machine).
    """
    root = Path(root).resolve()
    page = root / START_PAGE
    if not page.is_file():
        raise ValueError(f"root: {root} is not a ringlab checkout (no {START_PAGE} in it)")
    exe = executable or str(Path(sys.executable).with_name("jupyter-lab"))
    argv = [exe, str(page), f"--ServerApp.root_dir={root}", f"--LabApp.default_url=/lab/tree/{START_PAGE}",
            f"--ContentsManager.hide_globs={HIDDEN!r}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")
    return argv + list(extra)


def find_root(start: str | os.PathLike = ".") -> Path:
    """``start`` or the first of its parents that holds :data:`START_PAGE`; raises ValueError if none does."""
    here = Path(start).resolve()
    for folder in (here, *here.parents):
        if (folder / START_PAGE).is_file():
            return folder
    raise ValueError(f"no {START_PAGE} in {here} or its parents: run this from a ringlab checkout")


def main(argv: list[str] | None = None) -> int:
    extra = sys.argv[1:] if argv is None else argv
    try:
        command = lab_argv(find_root(), *extra)
    except ValueError as exc:
        print(f"ringlab lab: {exc}", file=sys.stderr)
        return 2
    if not Path(command[0]).is_file():
        print(f"ringlab lab: {command[0]} not found; install the lab extra (make install does)", file=sys.stderr)
        return 2
    os.execv(command[0], command)  # JupyterLab takes over this process: Ctrl+C stops it as usual
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
