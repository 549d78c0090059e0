"""Chunks of numel // N elements: the numel % N elements at the end are never sent, reduced or returned, and
every rank returns numel // N elements where numpy.array_split (and dist.reduce_scatter with uneven chunks)
gives the first numel % N ranks one more."""

# words the grader's first failure message must contain
EXPECT = ["world_size=2", "rank 0 returned 0 elements", "expected 1", "array_split"]
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def ring_reduce_scatter_p2p(tensor, group):
    rank, n = dist.get_rank(group), dist.get_world_size(group)
    size = tensor.numel() // n
    chunks = [tensor[i * size:(i + 1) * size].clone() for i in range(n)]
    sent = 0
    for step in range(n - 1):
        out_chunk = chunks[(rank - 1 - step) % n]
        incoming = torch.empty_like(chunks[(rank - 2 - step) % n])
        ops = [dist.P2POp(dist.isend, out_chunk, dist.get_global_rank(group, (rank + 1) % n), group),
               dist.P2POp(dist.irecv, incoming, dist.get_global_rank(group, (rank - 1) % n), group)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        chunks[(rank - 2 - step) % n] += incoming
        sent += out_chunk.numel() * out_chunk.element_size()
    return chunks[rank], sent
