"""11a : gradient accumulation with DDP: one all-reduce per optimizer step, full-batch gradients.

The grader starts 2 gloo processes (``ringlab.dist.launch``), wraps a small model in
``DistributedDataParallel`` with a communication hook that counts all-reduces, calls your
function on each rank with that rank's micro-batches, and compares ``.grad`` with the gradient
of the mean loss over the whole batch computed in one process. Grade it: ``ringlab check 11a``
(about 10 s: two processes must start and import DDP).
"""


def accumulate_gradients(model, micro_batches, loss_fn):
    """Accumulate the gradients of ``K = len(micro_batches)`` micro-batches into ``.grad``.

    Args:
        model: a ``torch.nn.parallel.DistributedDataParallel`` module; its ``.grad`` are zero/None on entry.
        micro_batches: list of K ``(x, y)`` tensor pairs, all with the same number of samples.
        loss_fn: ``loss_fn(output, y)`` -> scalar mean loss over the micro-batch.

    Must leave in ``.grad`` the gradient of the mean loss over all samples of all micro-batches
    of all ranks, with exactly ONE gradient all-reduce (one pass over DDP's buckets) in total.
    Do not call an optimizer. Returns None.
    """
    raise NotImplementedError("11a: replace this line with your code")
