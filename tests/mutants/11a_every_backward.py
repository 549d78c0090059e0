"""Plain loop without no_sync: DDP all-reduces after every backward (K rounds per step; gradients still right)."""

# words the grader's first failure message must contain
EXPECT = ["all-reduce rounds", "expected 1", "no_sync"]


def accumulate_gradients(model, micro_batches, loss_fn):
    k = len(micro_batches)
    for x, y in micro_batches:
        (loss_fn(model(x), y) / k).backward()
