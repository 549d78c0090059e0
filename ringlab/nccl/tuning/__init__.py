"""NCCL's own tuning model, ported: what it predicts for every algorithm x protocol, and what it picks.

API
---
``tune(comm, version)``                 -> :class:`Table`: ``ncclTopoTuneModel``'s latencies (us) and bandwidths (GB/s)
``choose(table, function, nbytes)``     -> :class:`Choice`: algorithm, protocol, predicted time, channels
``comm_for_cluster(cluster, version, env)``  the model's inputs estimated for a ringlab cluster
``format_table(table)`` / ``parse_table(lines)``  the table as NCCL prints it with NCCL_DEBUG_SUBSYS=TUNING
``parse_choices(lines)``                the ``Bytes -> Algo`` lines of a log
``KNOBS`` / ``FINDING_KNOBS``           which environment variable changes which decision
``VERSIONS``                            the releases ported (2.19, 2.29, 2.30), each with tag, commit and line ranges

Releases, files and line ranges: :mod:`ringlab.nccl.tuning.versions`. Checked against tables NCCL
printed itself (``tests/fixtures/nccl/tuning/``). Pure Python and numpy.
"""

from __future__ import annotations

from .choice import Choice, algo_time, choices, choose, time_terms
from .clusters import Estimate, comm_for_cluster
from .knobs import FINDING_KNOBS, KNOBS, Knob, knob_names, validate_env
from .logread import PrintedChoice, PrintedTable, format_table, parse_choices, parse_table
from .model import Comm, Graph, Table, tune
from .versions import NEWEST, VERSIONS, Version, get_version

__all__ = [
           "FINDING_KNOBS",
           "KNOBS",
           "NEWEST",
           "VERSIONS",
           "Choice",
           "Comm",
           "Estimate",
           "Graph",
           "Knob",
           "PrintedChoice",
           "PrintedTable",
           "Table",
           "Version",
           "algo_time",
           "choices",
           "choose",
           "comm_for_cluster",
           "format_table",
           "get_version",
           "knob_names",
           "parse_choices",
           "parse_table",
           "time_terms",
           "tune",
           "validate_env",
]
