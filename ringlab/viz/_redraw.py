"""Redrawing an explorer's axes in place: what an explorer calls before drawing a change on the same axes.

``Axes.cla()`` throws away the axes' ticks with everything else, and building them again (two lines and
two labels per tick; a log axis has a few dozen minor ticks) costs more than drawing the figure. Removing
only what was plotted keeps the ticks, the scales and any secondary axis, so a redraw pays for the new
data and text alone.
"""

from __future__ import annotations


def clear_plotted(*axes) -> None:
    """Remove every line, patch, text, collection, image and the legend of each of ``axes``, and let the
    next plot set the data limits afresh: autoscaling on, no previous data limits, the colour cycle
    from its start. Scales, ticks, labels set again by the plot, and child (secondary) axes stay."""
    for ax in axes:
        for container in list(ax.containers):  # bars: their patches, and the handle a legend would reuse
            container.remove()
        for artist in (*ax.lines, *ax.patches, *ax.texts, *ax.collections, *ax.images, *ax.artists):
            artist.remove()
        if ax.legend_ is not None:
            ax.legend_.remove()
        ax.ignore_existing_data_limits = True
        ax.set_autoscale_on(True)
        ax.set_prop_cycle(None)
