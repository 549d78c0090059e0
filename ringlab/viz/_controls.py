"""Controls of the explorers: one way to build them, so every explorer behaves alike.

Sliders send their value on release, not while dragged (``continuous_update=False``): a drag would
otherwise queue one redraw per position passed. A control is built only around a value it can take
(ValueError naming the argument and the accepted values otherwise), so an explorer opens on exactly
the default it was given: a slider never snaps it to its nearest grid point. Descriptions take the
width of their text (``description_width: initial``) instead of a fixed 80 px that cuts long ones.
"""

from __future__ import annotations

import math

from ._mpl import widgets

STYLE = {"description_width": "initial"}


def _values(options) -> list:
    """The values of ipywidgets-style options: plain values or (label, value) pairs."""
    return [o[1] if isinstance(o, tuple) and len(o) == 2 and isinstance(o[0], str) else o for o in options]


def _on_grid(k: float) -> bool:
    """Whether ``k`` steps is a whole number of steps (to float rounding)."""
    return abs(k - round(k)) < 1e-9


def _refuse(name: str, value, accepted: str):
    raise ValueError(f"{name} must be {accepted}, got {value!r}")


def _layout(width: str | None):
    return widgets().Layout(width=width) if width else widgets().Layout()


def int_slider(description: str, value: int, lo: int, hi: int, step: int = 1, name: str | None = None,
               width: str | None = None):
    """IntSlider over ``lo..hi`` in steps of ``step``; ValueError unless ``value`` is one of those integers."""
    if isinstance(value, bool) or not isinstance(value, int) or not (lo <= value <= hi and (value - lo) % step == 0):
        steps = f" in steps of {step}" if step > 1 else ""
        _refuse(name or description, value, f"an integer from {lo} to {hi}{steps}")
    return widgets().IntSlider(value=value, min=lo, max=hi, step=step, description=description,
                               continuous_update=False, style=STYLE, layout=_layout(width))


def float_slider(description: str, value: float, lo: float, hi: float, step: float, name: str | None = None,
                 width: str | None = None):
    """FloatSlider over ``lo..hi`` in steps of ``step``; ValueError unless ``value`` lies on that grid."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (number and lo <= value <= hi and _on_grid((value - lo) / step)):
        _refuse(name or description, value, f"a number from {lo:g} to {hi:g} in steps of {step:g}")
    return widgets().FloatSlider(value=float(value), min=lo, max=hi, step=step, description=description,
                                 continuous_update=False, style=STYLE, layout=_layout(width))


def selection_slider(description: str, options, value, name: str | None = None, width: str | None = None):
    """SelectionSlider over ``options`` (values or (label, value) pairs); ValueError unless ``value`` is one."""
    options = list(options)
    if value not in _values(options):
        _refuse(name or description, value, f"one of {_values(options)}")
    return widgets().SelectionSlider(options=options, value=value, description=description, continuous_update=False,
                                     style=STYLE, layout=_layout(width))


def dropdown(description: str, options, value, name: str | None = None, width: str | None = None):
    """Dropdown over ``options`` (values or (label, value) pairs); ValueError unless ``value`` is one."""
    options = list(options)
    if value not in _values(options):
        _refuse(name or description, value, f"one of {_values(options)}")
    return widgets().Dropdown(options=options, value=value, description=description, style=STYLE,
                              layout=_layout(width))


def image():
    """The explorer's picture at its own pixel size (one PNG pixel to one CSS pixel), shrunk only when the
    output area is narrower: the default layout stretches a PNG to the full width, blurring it."""
    return widgets().Image(format="png", layout=widgets().Layout(align_self="flex-start", max_width="100%",
                                                                 height="auto"))


def controls(box) -> list:
    """Every control under ``box`` (sliders, dropdowns, toggles, checkboxes, multi-selects), depth first."""
    found, stack = [], [box]
    while stack:
        w = stack.pop(0)
        if hasattr(w, "value") and hasattr(w, "description") and not isinstance(w, (widgets().HTML, widgets().Image)):
            found.append(w)
        stack[:0] = list(getattr(w, "children", ()))
    return found


def reachable(control) -> bool:
    """Whether ``control``'s value is one the user can set with it again: an option of a selection widget,
    a grid point of a slider (``min + k * step``; for a log slider ``base ** (min + k * step)``)."""
    w = widgets()
    v = control.value
    if isinstance(control, w.SelectMultiple):
        return set(v) <= set(control.options)
    if hasattr(control, "options"):
        return v in _values(control.options)
    if isinstance(control, w.FloatLogSlider):
        exponent = math.log(v, control.base) if v > 0 else math.nan
        return control.min <= exponent <= control.max and _on_grid((exponent - control.min) / control.step)
    if isinstance(control, (w.IntSlider, w.FloatSlider)):
        return control.min <= v <= control.max and _on_grid((v - control.min) / control.step)
    return isinstance(control, (w.Checkbox, w.Textarea, w.Text, w.ToggleButton))
