"""Right use of no_sync but forgets to divide each micro-batch loss by K: gradients K times too large."""

# words the grader's first failure message must contain
EXPECT = ["times the full-batch gradient", "1/K"]


def accumulate_gradients(model, micro_batches, loss_fn):
    for x, y in micro_batches[:-1]:
        with model.no_sync():
            loss_fn(model(x), y).backward()
    x, y = micro_batches[-1]
    loss_fn(model(x), y).backward()
