"""Lazy matplotlib import shared by the figure modules."""

from __future__ import annotations

import io


def pyplot():
    """Return ``matplotlib.pyplot``; ImportError naming the extra when matplotlib is missing."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("figures need matplotlib: pip install 'ringlab[lab]'") from exc
    return plt


def widgets():
    """Return the ``ipywidgets`` module; ImportError naming the extra when it is missing."""
    try:
        import ipywidgets
    except ImportError as exc:  # pragma: no cover
        raise ImportError("explorers need ipywidgets: pip install 'ringlab[lab]'") from exc
    return ipywidgets


# Explorer figures are drawn at 100 dpi and shown one PNG pixel per screen pixel: an 8 pt legend is 11 px on
# screen, and a figure 10.8 in wide fills the output area of a notebook in a 1280 px window.
EXPLORER_DPI = 100


class Canvas:
    """A figure an explorer keeps and redraws, instead of building a new one per change of a control.

    Kept off pyplot (so no inline backend displays or collects it) on one Agg canvas, so matplotlib's
    renderer, and with it the cache of text sizes (tick labels, mathtext), lives across redraws.
    ``png()`` draws it at :data:`EXPLORER_DPI`.
    """

    def __init__(self, width_in: float, height_in: float):
        pyplot()  # the ImportError naming the extra, when matplotlib is missing
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        self.fig = Figure(figsize=(width_in, height_in), dpi=EXPLORER_DPI)
        FigureCanvasAgg(self.fig)

    def png(self) -> bytes:
        buf = io.BytesIO()
        self.fig.savefig(buf, format="png", dpi=EXPLORER_DPI)
        return buf.getvalue()


def png_bytes(fig, dpi: int = EXPLORER_DPI) -> bytes:
    """Render ``fig`` to PNG bytes and close it (for ``ipywidgets.Image``, which emits no cell output)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    pyplot().close(fig)
    return buf.getvalue()


def show(image, caption, fig, text: str) -> None:
    """Put an explorer's new figure (a Figure, closed after drawing, or a :class:`Canvas`) and caption on
    screen, the figure first.

    A browser applies widget changes in the order they are sent, so once the caption shows the
    new text the figure is already the new one (a caption set first ran ahead of the PNG).
    """
    image.value = fig.png() if isinstance(fig, Canvas) else png_bytes(fig)
    caption.value = text
