"""Returns (P-1)/M for relative_to='total' too: the ideal-relative figure quoted as a share of wall clock."""

EXPECT = ["relative to total", "7/23", "relative to the ideal compute time"]


def pipeline_bubble(stages, microbatches, schedule, virtual_stages=1, relative_to="ideal"):
    v = virtual_stages if schedule == "interleaved-1f1b" else 1
    return (stages - 1) / (v * microbatches)  # bug: ignores relative_to
