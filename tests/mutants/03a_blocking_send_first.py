"""Every rank calls the blocking dist.send before dist.recv. No rank posts a receive while all are blocked in
send: on gloo a send waits for the matching receive whatever the size (on NCCL or MPI small messages may slip
through eagerly and only large ones deadlock). The grader must report the hang, not wait forever."""

# words the grader's first failure message must contain
EXPECT = ["world_size=2", "hung", "deadlock", "batch_isend_irecv"]
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def ring_reduce_scatter_p2p(tensor, group):
    rank, n = dist.get_rank(group), dist.get_world_size(group)
    chunks = [c.clone() for c in torch.tensor_split(tensor, n)]
    sent = 0
    for step in range(n - 1):
        out_chunk = chunks[(rank - 1 - step) % n]
        incoming = torch.empty_like(chunks[(rank - 2 - step) % n])
        dist.send(out_chunk, dist.get_global_rank(group, (rank + 1) % n), group=group)  # waits for a receive
        dist.recv(incoming, dist.get_global_rank(group, (rank - 1) % n), group=group)  # that nobody has posted
        chunks[(rank - 2 - step) % n] += incoming
        sent += out_chunk.numel() * out_chunk.element_size()
    return chunks[rank], sent
