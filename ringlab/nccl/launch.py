"""The rank count a command line asks for: nccl-tests' own flags times the launcher's processes.

nccl-tests (``src/common.cu``, 2.19.6) runs ``-t, --nthreads`` threads per process, each driving ``-g,
--ngpus`` GPUs, so a process has ``t x g`` ranks (its ``nThread .. nGpus ..`` header line prints both).
The launcher sets the processes: Open MPI / MPICH ``mpirun`` or ``mpiexec`` ``-np N``, ``-n N``, ``--np N``,
``-c N``; Slurm ``srun`` ``-n N``, ``--ntasks N`` or ``-N nodes`` with ``--ntasks-per-node M``. With no
launcher on the line the binary is one process. (``-N`` of nccl-tests itself is ``--run_cycles``, not a
count of anything: only srun's ``-N``, before the binary, is nodes.)
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

_BINARY = re.compile(r"(?:^|/)(?:[a-z_]+)_perf(?:_mpi)?$")
_MPI = {"mpirun", "mpiexec", "orterun", "mpiexec.hydra"}
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _tokens(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=False)
    except ValueError:  # an unbalanced quote in a pasted line
        return text.split()


def _flag(tokens: list[str], names: tuple[str, ...]) -> int | None:
    """The int after the last of ``names`` (``-n 8``, ``-n8``, ``--ntasks=8``), or None."""
    found = None
    for i, tok in enumerate(tokens):
        for name in names:
            value = None
            if tok == name and i + 1 < len(tokens):
                value = tokens[i + 1]
            elif name.startswith("--") and tok.startswith(name + "="):
                value = tok[len(name) + 1:]
            elif not name.startswith("--") and len(name) == 2 and tok.startswith(name) and tok[2:].isdigit():
                value = tok[2:]
            if value is not None and value.isdigit():
                found = int(value)
    return found


@dataclass(frozen=True)
class Launch:
    """What a command line asks for: ``processes`` x ``threads`` x ``gpus`` ranks; ``how`` names the flags."""

    processes: int
    threads: int
    gpus: int
    how: str

    @property
    def ranks(self) -> int:
        return self.processes * self.threads * self.gpus


def launch_of(text: str) -> Launch | None:
    """The :class:`Launch` of a command line that runs an nccl-tests / rccl-tests binary, or None when the line
    runs none or a launcher's count is not given as a plain integer."""
    tokens = _tokens(text)
    at = next((i for i, t in enumerate(tokens) if _BINARY.search(t)), None)
    if at is None:
        return None
    launcher, own = tokens[:at], tokens[at + 1:]
    # before the binary: a shell prompt, VAR=value settings, or a launcher; anything else (echo, grep) runs nothing
    bare = [t for t in launcher if not (_ASSIGN.match(t) or t in ("$", "#", ">") or t.endswith(("$", "#")))]
    if bare and not {t.rsplit("/", 1)[-1] for t in bare} & (_MPI | {"srun"}):
        return None
    threads = _flag(own, ("-t", "--nthreads")) or 1
    gpus = _flag(own, ("-g", "--ngpus")) or 1
    procs, how = 1, "one process (no launcher)"
    names = {t.rsplit("/", 1)[-1] for t in launcher}
    if names & _MPI:
        n = _flag(launcher, ("-np", "--np", "-n", "--n", "-c"))
        if n is None:
            return None  # mpirun with hosts only (-H a:8,b:8): not read here
        procs, how = n, f"mpirun -np {n}"
    elif "srun" in names:
        n = _flag(launcher, ("-n", "--ntasks"))
        nodes, per = _flag(launcher, ("-N", "--nodes")), _flag(launcher, ("--ntasks-per-node",))
        if n is None and nodes and per:
            n = nodes * per
        if n is None:
            return None
        procs, how = n, f"srun {n} tasks"
    return Launch(procs, threads, gpus, f"{how} x -t {threads} x -g {gpus}")
