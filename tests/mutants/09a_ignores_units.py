"""Only plain numbers parse: '3 %' and '15109 MiB' (units printed despite nounits) become None."""

# words the grader's first failure message must contain
EXPECT = ["utilization_gpu_pct should be 3.0", "got None"]
METRICS = ("utilization_gpu_pct", "memory_used_mib", "memory_total_mib", "power_draw_w", "temperature_gpu_c")


def parse_smi_row(line):
    parts = [part.strip() for part in line.split(",")]
    if len(parts) < 8 or not parts[0].isdigit():
        return None
    row = {"index": int(parts[0]), "uuid": parts[1], "name": ", ".join(parts[2:-5])}
    for key, text in zip(METRICS, parts[-5:]):
        try:
            row[key] = float(text)
        except ValueError:
            row[key] = None
    return row
