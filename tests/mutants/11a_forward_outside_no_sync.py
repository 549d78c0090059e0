"""Forward outside no_sync, only the backward inside: DDP already prepared the sync at forward time, so
every backward still all-reduces (K rounds per step)."""

# words the grader's first failure message must contain
EXPECT = ["forwards ran outside no_sync", "forward time"]


def accumulate_gradients(model, micro_batches, loss_fn):
    k = len(micro_batches)
    for i, (x, y) in enumerate(micro_batches):
        loss = loss_fn(model(x), y) / k
        if i < k - 1:
            with model.no_sync():
                loss.backward()
        else:
            loss.backward()
