"""Sample per-GPU utilization and memory into an append-only CSV log that survives driver faults.

Backends
--------
``nvml``
    The NVIDIA Management Library through nvidia-ml-py (module ``pynvml``, optional:
    ``pip install 'ringlab[gpu]'``): a few library calls per GPU per tick, no process forked.
``smi``
    ``nvidia-smi --query-gpu=<SMI_FIELDS> --format=csv,noheader,nounits`` in a subprocess, killed
    after ``smi_timeout`` seconds, because a wedged driver can leave nvidia-smi hanging forever.
``auto``
    ``nvml`` when ``pynvml`` imports and ``nvmlInit()`` succeeds, otherwise ``smi``.

CSV schema
----------
One header line (the names below, in this order), then rows appended tick by tick; UTF-8,
``\\n`` line ends, quoting as Python's :mod:`csv` does it. An empty cell means "not known";
a metric is never written as 0 unless the driver said 0.

====================  ==========================================================================
column                meaning
====================  ==========================================================================
timestamp             start of the tick, UTC ISO-8601 with milliseconds; shared by its rows
kind                  ``sample`` | ``lost`` | ``back`` | ``error`` (below)
source                ``nvml`` | ``smi``: the backend that produced the row
index                 GPU index as the backend enumerates it
uuid                  GPU UUID (``GPU-...``)
name                  product name, e.g. ``NVIDIA H100 80GB HBM3``
utilization_gpu_pct   % of the driver's sample period in which a kernel ran (``utilization.gpu``)
memory_used_mib       device memory in use, MiB = 2**20 bytes (``memory.used``)
memory_total_mib      device memory, MiB (``memory.total``)
power_draw_w          board power, W (``power.draw``)
temperature_gpu_c     core temperature, degrees C (``temperature.gpu``)
code                  error rows: nvidia-smi's exit status, or NVML's ``nvmlReturn_t`` value
message               error rows: what went wrong; several lines are joined with `` | ``
====================  ==========================================================================

The quantities and their units are those of ``nvidia-smi --help-query-gpu`` and the NVML API
reference (``nvmlDeviceGetMemoryInfo`` reports bytes, floored here to whole MiB as nvidia-smi
prints them; ``nvmlDeviceGetPowerUsage`` reports milliwatts, divided by 1000 here).

Row kinds
~~~~~~~~~
``sample``
    One GPU's readings. A value the driver does not give (``[N/A]``, ``[Not Supported]``,
    ``N/A``, any other non-number; NVML's ``NVML_ERROR_NOT_SUPPORTED``) is left empty.
``lost``
    A GPU seen in an earlier tick is missing from this one, whatever the cause (an ``error``
    row of the same tick usually says why). Written once, on the first tick it is missing,
    with the last index, uuid and name seen. GPUs are told apart by uuid (by index when the
    uuid is unknown).
``back``
    A lost GPU is seen again; its ``sample`` row follows in the same tick.
``error``
    A call that went wrong: nvidia-smi missing, timed out, exiting non-zero or printing a line
    that is not a GPU line (``code`` holds the exit status); NVML failing to initialise or to
    count devices (whole tick), or failing on one GPU (that GPU's index, and uuid/name when
    known; the other GPUs are still sampled). The monitor writes the row and keeps sampling.

Within a tick: ``error`` rows first, then per GPU in the order reported ``back`` (if any) and
``sample``, then ``lost`` rows by index.

Repeats are not logged: an ``error`` row identical to one of the previous tick (same GPU, code and
message) is left out until the error goes away and comes back. A metric that nvidia-smi replaces
by a failure placeholder (``[Insufficient Permissions]``, ``[Unknown Error]``, ``[GPU requires
reset]``, ``ERR!``; not the plain "not available" ``[N/A]`` / ``[Not Supported]``) is left empty and
its reason written once as an ``error`` row, ``message`` ``"<field>: <placeholder>"``, then again only
when the reason changes.

Faults: every NVML call runs in a worker thread with a deadline (``nvml_timeout``); a call that
does not return in time is abandoned (the thread is left to finish on its own), written as an
``error`` row, ends the tick, and NVML is shut down and initialised again on the next tick, as it
also is after a GPU is lost. A cell longer than :data:`CELL_MAX` characters (a garbage line from a
broken driver) is cut and ends with ``...[N chars, truncated]``; control characters become spaces.

Durability: the log is opened for appending; the header is written only to an empty file, and a
file whose first line is another header is refused (``ValueError``). Each tick is written with
``write`` calls followed by ``os.fsync``, so a crash loses at most the tick in progress. When a
write or fsync fails (disk full, I/O error) the partial tick is cut off again, so the file ends
with the last whole tick, and :class:`LogWriteError` is raised. Before each tick the log checks
that its path still names the file it has open; if the file was deleted or renamed (rotated), it
starts a new file at the path, whose first row after the header says so.

Modules, the pure part first: :mod:`~ringlab.labs.gpumon.rows` (parsing nvidia-smi's text, the
exercise's subject), :mod:`~ringlab.labs.gpumon.samplers` (NVML / nvidia-smi under deadlines),
:mod:`~ringlab.labs.gpumon.log` (the durable CSV log), :mod:`~ringlab.labs.gpumon.loop` (the run
loop). Everything is importable from ``ringlab.labs.gpumon`` itself, as before the split.
"""

from pathlib import Path

from .log import GpumonLog, LogWriteError, read_log
from .loop import PresenceTracker, RepeatFilter, run
from .rows import CELL_MAX, HEADER, KINDS, METRICS, SMI_FIELDS, Row, parse_smi_csv, parse_value
from .samplers import (
    BACKENDS,
    MAX_SECONDS,
    MIB,
    NVML_ERROR_GPU_IS_LOST,
    STOP_GRACE,
    DeadlineCaller,
    NvmlSampler,
    NvmlTimeout,
    Sampler,
    SmiSampler,
    check_seconds,
    open_sampler,
)

SAMPLE_LOG = Path(__file__).parent.parent / "data" / "gpumon_sample.csv"

__all__ = [
    "BACKENDS", "CELL_MAX", "DeadlineCaller", "GpumonLog", "HEADER", "KINDS", "LogWriteError", "MAX_SECONDS", "METRICS",
    "MIB", "NVML_ERROR_GPU_IS_LOST", "NvmlSampler", "NvmlTimeout", "PresenceTracker", "RepeatFilter", "SAMPLE_LOG",
    "SMI_FIELDS", "STOP_GRACE", "Row", "Sampler", "SmiSampler", "check_seconds", "open_sampler", "parse_smi_csv",
    "parse_value", "read_log", "run",
]
