"""09a : parse one line of nvidia-smi's CSV output, keeping "not known" apart from 0.

The monitor runs ``nvidia-smi --query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total,
power.draw,temperature.gpu --format=csv,noheader,nounits``. Real drivers print placeholders
such as ``[N/A]`` (a unified-memory GPU has no separate memory.used), ``[Not Supported]`` or
``ERR!``, sometimes units despite ``nounits``, and whole lines that are messages, not GPUs.
Grade it: ``ringlab check 09a``.
"""

import re

NUMBER = re.compile(r"(\d+(?:\.\d+)?)(?:\s*[A-Za-z%]+)?")  # "37", "212.53", "3 %", "81559 MiB"
METRICS = ("utilization_gpu_pct", "memory_used_mib", "memory_total_mib", "power_draw_w", "temperature_gpu_c")


def parse_smi_row(line):
    """Parse one output line of the query above.

    Args:
        line: str, e.g. ``"0, GPU-6f2c..., NVIDIA H100 80GB HBM3, 37, 18211, 81559, 212.53, 36"``.
            Fields are separated by commas with optional spaces; the name itself may contain
            commas (everything between the uuid and the last five fields is the name).

    Returns:
        ``None`` for a line that is not a GPU row (fewer than 8 fields, or an index that is not a
        whole number: ``No devices were found``, driver error messages, blank lines).
        Otherwise a dict with ``index`` (int), ``uuid`` and ``name`` (str, stripped) and the five
        :data:`METRICS` in order (utilization %, memory used MiB, memory total MiB, power W,
        temperature C) as floats. A metric that is not a plain non-negative number, optionally
        followed by a unit word (``"3 %"``, ``"81559 MiB"``), is ``None``: ``[N/A]``,
        ``[Not Supported]``, ``N/A``, ``ERR!``, an empty field. Never 0 for "not known".
    """
    raise NotImplementedError("09a: replace this line with your code")
