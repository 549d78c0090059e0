"""Treats interleaved 1F1B like plain 1F1B: the bubble is not divided by the number of chunks v."""

EXPECT = ["interleaved-1f1b", "7/32", "divides the bubble by virtual_stages"]


def pipeline_bubble(stages, microbatches, schedule, virtual_stages=1, relative_to="ideal"):
    bubble, compute = stages - 1, microbatches  # bug: v forgotten
    return bubble / compute if relative_to == "ideal" else bubble / (bubble + compute)
