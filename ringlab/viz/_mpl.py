"""Lazy matplotlib import shared by the figure modules."""

from __future__ import annotations


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


def png_bytes(fig, dpi: int = 80) -> bytes:
    """Render ``fig`` to PNG bytes and close it (for ``ipywidgets.Image``, which emits no cell output)."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    pyplot().close(fig)
    return buf.getvalue()


def show(image, caption, fig, text: str) -> None:
    """Put an explorer's new figure and caption on screen, the figure first.

    A browser applies widget changes in the order they are sent, so once the caption shows the
    new text the figure is already the new one (a caption set first ran ahead of the PNG).
    """
    image.value = png_bytes(fig)
    caption.value = text
