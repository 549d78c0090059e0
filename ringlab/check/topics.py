"""The course map shown by ``notebooks/00_start_here.ipynb``: topics, what each teaches, progress.

Notebooks are discovered when the map is built (``NN_*.ipynb`` next to the start page). A
notebook's title is its first markdown heading and its exercises are the ids its grader cells
grade, so the only thing kept here is one line per topic saying what it teaches. Progress comes
from :func:`ringlab.check.grade` on every registered exercise: the data ``ringlab check --all``
prints.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

from . import grade
from .exercise import Exercise
from .registry import EXERCISES
from .result import GradeResult

# Keyed by the notebook's two-digit number, so a renamed notebook keeps its line.
TEACHES: dict[str, str] = {
    "01": "Ring all-reduce as a schedule: reduce-scatter then all-gather, checked against a direct sum, "
          "2(N-1)/N x M bytes per rank.",
    "02": "The collective primitives and their bytes per rank; ring against tree in the alpha-beta model.",
    "03": "Ring reduce-scatter over real processes with torch.distributed send/recv, and why the widely "
          "copied version is wrong for N > 2.",
    "04": "Gradient traffic of DDP against FSDP FULL_SHARD (1.5x DDP) and the memory that sharding saves.",
    "05": "KV-cache bytes per token and per batch: grouped KV heads, MQA, MLA, sliding windows, tensor "
          "parallelism, GB against GiB.",
    "06": "Roofline: arithmetic intensity against the ridge point, dense against sparse TFLOP/s, fusion.",
    "07": "Decode step time against batch size: flat while memory-bound, and the largest batch under a "
          "latency SLA.",
    "08": "Pipeline bubbles: (P-1)/M of the ideal time, GPipe against 1F1B memory, interleaved schedules.",
    "09": "A GPU monitor logging utilization and memory to CSV that survives vanished GPUs, [N/A] values "
          "and a failing nvidia-smi.",
    "10": "Mismatched collectives: the hang, TORCH_DISTRIBUTED_DEBUG=DETAIL, and a guard naming the ranks "
          "and fields that differ.",
    "11": "Gradient accumulation with DDP no_sync: one all-reduce per step instead of K, gradients equal "
          "to the full batch.",
    "12": "A fused LayerNorm forward in Triton (its interpreter on CPU): one pass per row, masks, loops "
          "over wide rows.",
    "13": "NVLink domains against the scale-out fabric: NICs on rails, NCCL's channels, bytes per link, the "
          "line-rate ceiling against published nccl-tests runs.",
    "14": "Paged KV-cache blocks: block tables, prefix sharing by chained hashes of full blocks, copy-on-write "
          "after a fork, and what a 60 GiB pool holds.",
    "15": "Continuous batching: admit, step, preempt; TTFT and TPOT against load, and the livelock that "
          "reserving decode room and preempting the newest break.",
    "16": "Reading NCCL: every column of nccl-tests output, algbw against busbw, what NCCL_DEBUG=INFO says about "
          "transports and channels, and whether a real run is healthy.",
}

_NOTEBOOK = re.compile(r"^(\d\d)_\w+\.ipynb$")
_GRADED = re.compile(r"""grade\(\s*["'](ex\d+)["']""")


@dataclass(frozen=True)
class Topic:
    """One topic notebook: ``number`` ("01"), file ``path``, ``title`` (first heading), ``teaches``
    (one line from :data:`TEACHES`, empty when missing) and the ``exercises`` its grader cells grade."""

    number: str
    path: Path
    title: str
    teaches: str
    exercises: tuple[str, ...]


def read_topic(path: Path) -> Topic:
    """Read a notebook's title and graded exercise ids. Raises ValueError for a name not ``NN_*.ipynb``."""
    path = Path(path)
    match = _NOTEBOOK.match(path.name)
    if not match:
        raise ValueError(f"path must name a notebook NN_topic.ipynb, got {path.name!r}")
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    title, exercises = path.stem, []
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and title == path.stem:
            heading = next((line for line in source.splitlines() if line.startswith("#")), None)
            title = heading.lstrip("#").strip() if heading else title
        if cell["cell_type"] == "code" and "grader" in cell.get("metadata", {}).get("tags", []):
            exercises += [ex for ex in _GRADED.findall(source) if ex not in exercises]
    number = match.group(1)
    return Topic(number, path, title, TEACHES.get(number, ""), tuple(exercises))


def default_folder() -> Path:
    """The working directory when it holds topic notebooks (a kernel runs there), else the project's
    ``notebooks/`` folder found as :mod:`ringlab.check.loader` finds ``exercises/``."""
    from .loader import _find_dir

    here = Path.cwd()
    return here if any(_NOTEBOOK.match(p.name) for p in here.glob("*.ipynb")) else _find_dir("notebooks")


def discover(folder: str | Path | None = None) -> list[Topic]:
    """Every topic notebook ``NN_*.ipynb`` in ``folder`` (default :func:`default_folder`), in number order,
    except the start page ``00_*`` itself."""
    folder = Path(folder) if folder is not None else default_folder()
    paths = sorted(p for p in folder.glob("*.ipynb") if _NOTEBOOK.match(p.name) and not p.name.startswith("00_"))
    return [read_topic(p) for p in paths]


@dataclass
class Progress:
    """Each registered exercise with its grade, in id order: the rows of ``ringlab check --all``."""

    rows: list[tuple[Exercise, GradeResult]]

    @property
    def passed(self) -> int:
        return sum(res.passed for _, res in self.rows)

    def status(self, exercise_id: str) -> str:
        """Status of one exercise ("not attempted" / "wrong" / "passed"); "unknown" if not registered."""
        return next((res.status for ex, res in self.rows if ex.id == exercise_id), "unknown")

    def __str__(self) -> str:
        lines = [f"{'id':<5} {'card':<4} {'status':<14} title"]
        lines += [f"{ex.id:<5} {ex.problem:<4} {res.status:<14} {ex.title}" for ex, res in self.rows]
        lines.append(f"{self.passed}/{len(self.rows)} passed")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td>{ex.id}</td><td>{ex.problem}</td><td>{_badge(res.status)}</td>"
                       f"<td style='text-align:left'>{html.escape(ex.title)}</td></tr>" for ex, res in self.rows)
        return ("<table><tr><th>id</th><th>card</th><th>status</th><th style='text-align:left'>title</th></tr>"
                f"{rows}</table><p>{self.passed}/{len(self.rows)} passed</p>")


def progress() -> Progress:
    """Grade every registered exercise from the learner's files (never raises; see :func:`grade`)."""
    return Progress([(ex, grade(ex_id)) for ex_id, ex in EXERCISES.items()])


_COLOURS = {"passed": "#1a7f37", "wrong": "#cf222e", "not attempted": "#9a6700"}


def _badge(status: str, label: str = "") -> str:
    text = f"{label} {status}" if label else status
    return f"<span style='color:{_COLOURS.get(status, '#57606a')}'>{html.escape(text)}</span>"


@dataclass
class CourseMap:
    """The start page: topics with links, what each teaches, and each topic's exercise statuses."""

    topics: list[Topic]
    progress: Progress

    def __str__(self) -> str:
        lines = []
        for t in self.topics:
            done = ", ".join(f"{ex} {self.progress.status(ex)}" for ex in t.exercises) or "no exercises"
            lines += [f"{t.path.name}: {t.title}", f"    {t.teaches}", f"    {done}"]
        lines.append(f"{self.progress.passed}/{len(self.progress.rows)} exercises passed")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        rows = []
        for t in self.topics:
            done = "<br>".join(_badge(self.progress.status(ex), ex) for ex in t.exercises) or "&ndash;"
            rows.append(f"<tr><td style='text-align:left'><a href='{html.escape(t.path.name)}'>"
                        f"{html.escape(t.title)}</a></td><td style='text-align:left'>{html.escape(t.teaches)}</td>"
                        f"<td style='text-align:left;white-space:nowrap'>{done}</td></tr>")
        return ("<table><tr><th style='text-align:left'>notebook</th><th style='text-align:left'>what it teaches"
                "</th><th style='text-align:left'>exercises</th></tr>" + "".join(rows) + "</table>"
                f"<p>{self.progress.passed}/{len(self.progress.rows)} exercises passed</p>")


def start_here(folder: str | Path | None = None) -> CourseMap:
    """The course map for the notebooks in ``folder`` (default :func:`default_folder`) with current grades."""
    return CourseMap(discover(folder), progress())
