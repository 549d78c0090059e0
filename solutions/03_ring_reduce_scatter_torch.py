"""03a : ring reduce-scatter written as the loop each process runs, with torch.distributed.

Your function runs in real processes: the grader starts them with ``ringlab.dist.launch`` (gloo,
CPU), gives every rank a 1-D tensor, and checks each rank's chunk against the direct sum over
ranks at world sizes 1..6, with sizes the world size does not divide. A rank that raises, or a
send that never meets its receive (a deadlock), is reported as wrong with the rank named.
Grade it: ``ringlab check 03a``.
"""

import torch
import torch.distributed as dist


def ring_reduce_scatter_p2p(tensor, group):
    """Ring reduce-scatter on this rank, with non-blocking point-to-point sends and receives.

    Args:
        tensor: this rank's 1-D tensor of ``numel`` elements (CPU; gloo). Do not modify it.
            Chunks follow ``torch.tensor_split(tensor, N)`` (the same rule as
            ``numpy.array_split``: the first ``numel % N`` chunks hold one element more; some
            chunks are empty when ``numel < N``).
        group: the ``torch.distributed`` process group of the N ranks taking part. Use
            ``dist.get_rank(group)`` and ``dist.get_world_size(group)``; ``P2POp`` wants the
            peer's *global* rank: ``dist.get_global_rank(group, group_rank)``.

    Returns:
        ``(output, bytes_sent)``: ``output`` is chunk ``rank`` of the elementwise sum over all
        ranks (what ``dist.reduce_scatter`` gives rank ``rank``), a 1-D tensor of the input's
        dtype; ``bytes_sent`` is the int number of bytes of the tensors this rank handed to
        ``isend`` (``numel() * element_size()``). Returning only ``output`` is accepted too;
        then your byte count is not checked.
    """
    ### BEGIN SOLUTION
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    to_next = dist.get_global_rank(group, (rank + 1) % world_size)
    from_prev = dist.get_global_rank(group, (rank - 1) % world_size)
    # A working copy: each chunk accumulates the partial sum this rank forwards later.
    chunks = [c.clone() for c in torch.tensor_split(tensor, world_size)]
    sent = 0
    for step in range(world_size - 1):
        # Chunk (rank - 1 - step) leaves; the chunk rank - 1 sends now, (rank - 2 - step), arrives.
        # After N - 1 steps the last arrival is chunk rank, holding all N contributions.
        out_chunk = chunks[(rank - 1 - step) % world_size]
        in_index = (rank - 2 - step) % world_size
        incoming = torch.empty_like(chunks[in_index])
        ops = [dist.P2POp(dist.isend, out_chunk, to_next, group),
               dist.P2POp(dist.irecv, incoming, from_prev, group)]
        for work in dist.batch_isend_irecv(ops):  # both posted before either is waited on: no deadlock
            work.wait()
        chunks[in_index] += incoming  # the partial sum grows by one rank per hop
        sent += out_chunk.numel() * out_chunk.element_size()
    return chunks[rank], sent
    ### END SOLUTION
