"""Card 09 (GPU monitor): the values its text uses."""

from __future__ import annotations


def values() -> dict:
    gpus, interval_s = 8, 5
    ticks = 24 * 3600 // interval_s
    return {"gpus": gpus, "interval_s": interval_s, "ticks": ticks, "rows": gpus * ticks}
