"""Readers of nccl-tests output and NCCL_DEBUG logs, what they say about the run, and findings.

API
---
``read_texts([(source, text), ...])``  -> :class:`Document`: runs (rows, devices, footer, log lines)
``explain(document, nics=None, nic_gbps=None)``  -> one :class:`Report` per run
``explain_texts(inputs, ...)``         both steps; ``Report.as_dict()`` / ``Report.text()``
``ceiling_busbw(facts, peak)``         the line-rate bound of ringlab.topology's cluster model
``fit_alpha_beta(sizes, times)``       relative least-squares ``t = alpha + beta S``
``ParseError``                         raised for input that is none of the formats, naming the line

NCCL's own tuning model (what it predicts and picks per size, its TUNING table) is :mod:`ringlab.nccl.tuning`.

Formats read: nccl-tests and rccl-tests text reports of every layout seen since 2018 (see
:mod:`ringlab.nccl.table`), nccl-tests ``-J`` JSON and rccl-tests JSON (:mod:`ringlab.nccl.jsonout`),
NCCL/RCCL ``NCCL_DEBUG=INFO`` lines (:mod:`ringlab.nccl.debuglog`), behind launcher prefixes
(:mod:`ringlab.nccl.lines`). Pure Python and numpy.
"""

from __future__ import annotations

from .ceiling import ceiling_busbw, gpu_link
from .facts import Facts
from .findings import Finding
from .fit import AlphaBeta, fit_alpha_beta
from .reader import Document, read_texts
from .records import ParseError
from .report import Report, explain


def explain_texts(inputs: list[tuple[str, str]], nics: int | None = None, nic_gbps: float | None = None) -> list[Report]:
    """:func:`explain` of :func:`read_texts`; raises :class:`ParseError` or ValueError (bad overrides)."""
    return explain(read_texts(inputs), nics=nics, nic_gbps=nic_gbps)


__all__ = ["AlphaBeta", "Document", "Facts", "Finding", "ParseError", "Report", "ceiling_busbw", "explain",
           "explain_texts", "fit_alpha_beta", "gpu_link", "read_texts"]
