"""Grader for topic 09, the GPU monitor (card 09).

* 09a ``parse_smi_row(line) -> dict | None``: hand-written rows with their expected dicts (real
  driver outputs: placeholders, units, messages), then rows generated from drawn values.
"""

from __future__ import annotations

from ..engine import CaseFailure, as_number, run_grader
from ..exercise import Exercise

SMI_METRICS = ("utilization_gpu_pct", "memory_used_mib", "memory_total_mib", "power_draw_w", "temperature_gpu_c")


H100 = ("GPU-6f2c9d8e-1a3b-4c5d-8e7f-0a1b2c3d4e5f", "NVIDIA H100 80GB HBM3")


def _gpu(index, uuid, name, *metrics):
    return {"index": index, "uuid": uuid, "name": name, **dict(zip(SMI_METRICS, metrics))}


# (line, expected): written by hand from nvidia-smi outputs, not computed by any parser
SMI_CASES = (
    ("0, GPU-6f2c9d8e-1a3b-4c5d-8e7f-0a1b2c3d4e5f, NVIDIA H100 80GB HBM3, 37, 18211, 81559, 212.53, 36",
     _gpu(0, *H100, 37.0, 18211.0, 81559.0, 212.53, 36.0)),
    ("0, GPU-6f2c9d8e-1a3b-4c5d-8e7f-0a1b2c3d4e5f, NVIDIA H100 80GB HBM3, 0, 0, 81559, 69.82, 31",
     _gpu(0, *H100, 0.0, 0.0, 81559.0, 69.82, 31.0)),
    ("0, GPU-1c2d3e4f-0000-1111-2222-333344445555, NVIDIA GB10, 3 %, [N/A], [N/A], 11.52 W, 45",
     _gpu(0, "GPU-1c2d3e4f-0000-1111-2222-333344445555", "NVIDIA GB10", 3.0, None, None, 11.52, 45.0)),
    ("7, GPU-b41d7e20-9c8f-4a6b-b5e4-3f2a1d0c9b8a, Tesla T4, 100, 15109 MiB, 15360 MiB, [Not Supported], 71",
     _gpu(7, "GPU-b41d7e20-9c8f-4a6b-b5e4-3f2a1d0c9b8a", "Tesla T4", 100.0, 15109.0, 15360.0, None, 71.0)),
    ("1, GPU-b41d7e20-9c8f-4a6b-b5e4-3f2a1d0c9b8a, NVIDIA A100-SXM4-80GB, ERR!, ERR!, 81920, ERR!, ERR!",
     _gpu(1, "GPU-b41d7e20-9c8f-4a6b-b5e4-3f2a1d0c9b8a", "NVIDIA A100-SXM4-80GB", None, None, 81920.0, None, None)),
    ("2, GPU-aa, NVIDIA GeForce RTX 4090, N/A, 512, 24564, , 40",
     _gpu(2, "GPU-aa", "NVIDIA GeForce RTX 4090", None, 512.0, 24564.0, None, 40.0)),
    ("3,GPU-bb,Quadro RTX 8000, Rev A,12,100,46080,50.5,38",
     _gpu(3, "GPU-bb", "Quadro RTX 8000, Rev A", 12.0, 100.0, 46080.0, 50.5, 38.0)),
    ("12, GPU-cc, NVIDIA L4, [Unknown Error], 0, 23034, 16.1, [N/A]",
     _gpu(12, "GPU-cc", "NVIDIA L4", None, 0.0, 23034.0, 16.1, None)),
    ("No devices were found", None),
    ("Unable to determine the device handle for GPU 0000:1B:00.0: Unknown Error", None),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
     "latest NVIDIA driver is installed and running.", None),
    ("", None),
    ("GPU 0000:1B:00.0, GPU-dd, NVIDIA H100, 1, 2, 3, 4, 5", None),
    ("0, GPU-ee, NVIDIA H100, 1, 2, 3", None),
    # not plain non-negative numbers: a sign, a second decimal point, text before the number
    ("4, GPU-ff, NVIDIA H100 80GB HBM3, -5, 1.2.3, 81559, abc 12, 40 C",
     _gpu(4, "GPU-ff", "NVIDIA H100 80GB HBM3", None, None, 81559.0, None, 40.0)),
)


PLACEHOLDERS = ("[N/A]", "[Not Supported]", "N/A", "ERR!", "[Unknown Error]", "")


def smi_cases() -> list[dict]:
    return [{"line": line} for line, _ in SMI_CASES]


def _expected_smi(line: str):
    for text, expected in SMI_CASES:
        if text == line:
            return expected
    raise KeyError(line)


def smi_strategy():
    """Rows built from drawn values: each metric a number (maybe with its unit) or a placeholder."""
    from hypothesis import strategies as st

    metric = st.one_of(st.sampled_from(PLACEHOLDERS).map(lambda p: (p, None)),
                       st.integers(0, 200000).map(lambda v: (str(v), float(v))),
                       st.integers(0, 99999).map(lambda v: (f"{v / 100:.2f}", round(v / 100, 2))))
    unit = st.sampled_from(("", " %", " MiB", " W"))

    def build(index, name, metrics, units):
        cells = [text + (u if value is not None else "") for (text, value), u in zip(metrics, units)]
        line = ", ".join([str(index), f"GPU-{index:04d}", name, *cells])
        return {"line": line, "expected": _gpu(index, f"GPU-{index:04d}", name, *(v for _, v in metrics))}

    return st.builds(build, st.integers(0, 63), st.sampled_from(("NVIDIA H100 80GB HBM3", "NVIDIA GB10", "Tesla V100")),
                     st.lists(metric, min_size=5, max_size=5), st.lists(unit, min_size=5, max_size=5))


def check_smi_row(fn, line: str, expected=KeyError) -> None:
    """09a: the returned dict (or None) equals the expected one; placeholders are None, never 0."""
    if expected is KeyError:
        expected = _expected_smi(line)
    got = fn(line)
    if expected is None:
        if got is not None:
            raise CaseFailure(f"this line is not a GPU row and should give None, got {got!r}")
        return
    if not isinstance(got, dict):
        raise CaseFailure(f"should return a dict for this GPU row, got {got!r}")
    missing = [k for k in expected if k not in got]
    if missing:
        raise CaseFailure(f"the dict lacks the keys {missing}")
    for key, want in expected.items():
        value = got[key]
        if want is None and value is not None:
            raise CaseFailure(f"{key} should be None (the field is a placeholder or not a plain non-negative number: "
                              f"not known), got {value!r}; a placeholder must never become 0, nor a partial match "
                              "such as -5 or 1.2.3 a number")
        if want is None:
            continue
        if isinstance(want, str):
            if value != want:
                raise CaseFailure(f"{key} should be {want!r} (a str), got {value!r}")
            continue
        if value is None:
            raise CaseFailure(f"{key} should be {want!r}, got None")
        number = as_number(value, key, whole=key == "index")  # the graders' one rule: 37 and 37.0 are equal
        if number != want:
            raise CaseFailure(f"{key} should be {want!r}, got {value!r}")


def _smi(fn):
    return run_grader("09a", "parse_smi_row", fn, check_smi_row, smi_cases(), smi_strategy(),
                      "every row parsed; placeholders are None, never 0; messages give None")


EXERCISES = (
    Exercise("09a", "parse_smi_row", "Parse an nvidia-smi CSV row", _smi, (
        "Split on commas and strip spaces; a GPU row has 8 fields and starts with a whole-number index. "
        "Anything else (No devices were found, driver errors) is not a GPU row.",
        "[N/A], [Not Supported], ERR! and empty fields mean 'not known': return None, never 0, or a plot "
        "and every average over the log would show a GPU with no memory in use.",
        "A metric may carry a unit ('3 %', '81559 MiB'): keep the number before it. The name may contain "
        "commas: it is everything between the uuid and the last five fields.",
    )),
)
