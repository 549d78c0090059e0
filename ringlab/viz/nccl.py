"""Figures and an explorer for ``ringlab explain``: busbw against size with the ceiling, and a paste box.

:func:`plot_busbw` draws what :mod:`ringlab.nccl` read (one line per run, its alpha-beta fit, where
it stops being latency-bound, and the line-rate ceiling of :func:`ringlab.nccl.ceiling_busbw`);
``ringlab explain --plot`` saves the same figure. :func:`explain_explorer` is the notebook widget:
paste nccl-tests output or an NCCL_DEBUG=INFO log, press the button, read the report.
"""

from __future__ import annotations

import html
import os

from ringlab.nccl import ParseError, explain_texts

from ._controls import STYLE
from ._controls import image as explorer_image
from ._mpl import pyplot, show, widgets


def plot_busbw(reports, ax=None, title: str = "busbw against message size"):
    """busbw (GB/s, 1e9 B/s) against message size S (bytes, log2 axis) for each :class:`~ringlab.nccl.Report`.

    Per run: the larger of the out-of-place and in-place busbw of each row (as ``peak_busbw`` uses), the
    alpha-beta fit turned into busbw (``S / t(S)`` times the printed busbw/algbw), a vertical line where the
    fit's latency term equals its bandwidth term, and the ceiling as a dashed line. Returns the Figure.
    """
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4.8))
    for i, rep in enumerate(reports):
        rows = sorted(rep.run.rows, key=lambda r: r.size)
        if not rows:
            continue
        colour = f"C{i % 10}"
        label = os.path.basename(rep.source) if len(reports) > 1 else (rep.facts.collective or "busbw")
        if rep.run.implementation:
            label += f" [{rep.run.implementation}]"
        sizes = [r.size for r in rows]
        ax.plot(sizes, [r.busbw for r in rows], "o-", color=colour, ms=3, label=f"{label} measured")
        if rep.fit is not None and rep.facts.bus_ratio:
            model = [s / rep.fit.time(s) * rep.facts.bus_ratio / 1e9 for s in sizes]
            ax.plot(sizes, model, ":", color=colour, label=f"alpha-beta fit (alpha {rep.fit.alpha * 1e6:.1f} us)")
        if rep.fit is not None:
            ax.axvline(rep.fit.crossover, color=colour, ls="-.", lw=0.8,
                       label=f"latency-bound below {rep.fit.crossover:,.0f} B")
        if rep.expected_busbw:
            ax.axhline(rep.expected_busbw / 1e9, color=colour, ls="--", lw=1,
                       label=f"ceiling {rep.expected_busbw / 1e9:g} GB/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size S (bytes)")
    ax.set_ylabel("busbw (GB/s, 1e9 B/s)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    ax.figure.tight_layout()
    return ax.figure


def explain_html(text: str, source: str = "pasted") -> tuple[str, list]:
    """``(html, reports)`` for pasted ``text``: each run's :meth:`~ringlab.nccl.Report.text` in a ``<pre>``,
    or the reader's one-line error (:class:`~ringlab.nccl.ParseError`, no traceback) and no reports."""
    if not text.strip():
        return "<i>paste nccl-tests output or an NCCL_DEBUG=INFO log above, then press explain</i>", []
    try:
        reports = explain_texts([(source, text)])
    except (ParseError, ValueError) as exc:
        return f"<pre style='color:#cf222e'>{html.escape(str(exc))}</pre>", []
    body = "\n\n".join(r.text() for r in reports)
    return f"<pre>{html.escape(body)}</pre>", reports


def explain_explorer(examples: dict[str, str] | None = None, text: str = "", source: str = "pasted"):
    """Widget: pick a stored run or paste your own, press ``explain``, read the report and the busbw figure.

    ``examples`` maps a label to the text of a run (nccl-tests output and/or an NCCL_DEBUG=INFO log); the
    dropdown copies the chosen one into the ``Textarea`` and explains it. ``text`` (default: the first
    example) fills the box at start. Returns an ``ipywidgets.VBox`` (dropdown, textarea, button, HTML report,
    PNG image). Callbacks only set widget values (nothing printed, so notebook validation sees no stray
    output). Raises ValueError for an ``examples`` value that is not text.
    """
    w = widgets()
    examples = dict(examples or {})
    if not all(isinstance(v, str) for v in examples.values()):
        raise ValueError("examples must map labels to the text of a run (str)")
    start = text or next(iter(examples.values()), "")
    picker = w.Dropdown(options=list(examples) or ["(none)"], description="example", disabled=not examples,
                        layout=w.Layout(width="60%"), style=STYLE)
    box = w.Textarea(value=start, placeholder="paste all_reduce_perf output and/or NCCL_DEBUG=INFO lines here",
                     layout=w.Layout(width="100%", height="12em"))
    button = w.Button(description="explain", button_style="primary")
    report = w.HTML()
    image = explorer_image()

    def render(*_):
        named = box.value == examples.get(picker.value)  # an example as picked, not edited: its name
        page, reports = explain_html(box.value, picker.value if named else source)
        if any(r.run.rows for r in reports):
            show(image, report, plot_busbw(reports), page)
        else:
            image.value = b""
            report.value = page

    def pick(change):
        box.value = examples[change["new"]]
        render()

    picker.observe(pick, names="value")
    button.on_click(render)
    render()
    return w.VBox([picker, box, button, report, image])


__all__ = ["explain_explorer", "explain_html", "plot_busbw"]
