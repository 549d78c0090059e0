"""Turns every placeholder ([N/A], ERR!, ...) into 0.0: a unified-memory GPU then shows 0 MiB in use."""

# words the grader's first failure message must contain
EXPECT = ["None", "never become 0", "memory_used_mib"]
import re

NUMBER = re.compile(r"(\d+(?:\.\d+)?)(?:\s*[A-Za-z%]+)?")
METRICS = ("utilization_gpu_pct", "memory_used_mib", "memory_total_mib", "power_draw_w", "temperature_gpu_c")


def parse_smi_row(line):
    parts = [part.strip() for part in line.split(",")]
    if len(parts) < 8 or not parts[0].isdigit():
        return None
    row = {"index": int(parts[0]), "uuid": parts[1], "name": ", ".join(parts[2:-5])}
    for key, text in zip(METRICS, parts[-5:]):
        match = NUMBER.fullmatch(text)
        row[key] = float(match.group(1)) if match else 0.0
    return row
