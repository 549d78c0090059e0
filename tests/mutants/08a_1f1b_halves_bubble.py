"""Believes 1F1B halves GPipe's bubble; it only lowers the activations held in flight."""

EXPECT = ["1f1b bubble", "same bubble as GPipe", "activation memory"]


def pipeline_bubble(stages, microbatches, schedule, virtual_stages=1, relative_to="ideal"):
    v = virtual_stages if schedule == "interleaved-1f1b" else 1
    bubble, compute = (stages - 1) / v, microbatches
    if schedule == "1f1b":
        bubble /= 2  # bug
    return bubble / compute if relative_to == "ideal" else bubble / (bubble + compute)
