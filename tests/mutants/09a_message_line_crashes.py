"""Assumes every line is a GPU row: 'No devices were found' and driver errors raise instead of giving None."""

# words the grader's first failure message must contain
EXPECT = ["raised", "No devices were found"]
METRICS = ("utilization_gpu_pct", "memory_used_mib", "memory_total_mib", "power_draw_w", "temperature_gpu_c")


def parse_smi_row(line):
    parts = [part.strip() for part in line.split(",")]
    row = {"index": int(parts[0]), "uuid": parts[1], "name": ", ".join(parts[2:-5])}
    for key, text in zip(METRICS, parts[-5:]):
        number = text.split()[0] if text.split() and text[0].isdigit() else ""
        row[key] = float(number) if number else None
    return row
