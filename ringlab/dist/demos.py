"""Per-rank functions that notebook 03 (card 03) runs in real processes through :func:`ringlab.dist.launch`.

Spawned processes import the function they run by name, so a function typed into a notebook
cell cannot be launched; the notebook's functions live here instead. Importing this module does
not import torch; calling its functions does (``pip install 'ringlab[torch]'``).

* :func:`widely_copied_reduce_scatter`: the wrong version of card 03 (forwards original chunks).
* :func:`p9_demo`: one launch of four ranks comparing it, ringlab's ring and torch.distributed.
* :func:`blocking_exchange`: every rank sends before it receives, which deadlocks on gloo.
"""

from __future__ import annotations

import datetime

from .executor import run_ring_all_gather, run_ring_reduce_scatter, torch_modules


def widely_copied_reduce_scatter(tensor, group):
    """The ring reduce-scatter that circulates on forums and in tutorials, and is wrong for N > 2.

    At every step rank r sends its ORIGINAL chunk ``(r - 1 - step) % N`` to rank r + 1 and adds
    what it receives only when the received chunk's index is ``r``. Chunk r therefore collects
    the data of ranks r and r - 1 only: right at N = 2, missing N - 2 contributions beyond.
    Its traffic is the correct ring's (each rank sends every chunk but its own, once), so a
    byte count cannot reveal the mistake; the values can.

    Args and returns as ``ring_reduce_scatter_p2p`` of exercise 03a: ``tensor`` 1-D, chunked by
    ``torch.tensor_split``; returns ``(chunk rank of the "sum", bytes sent)``.
    """
    torch, dist = torch_modules()
    rank, n = dist.get_rank(group), dist.get_world_size(group)
    to_next = dist.get_global_rank(group, (rank + 1) % n)
    from_prev = dist.get_global_rank(group, (rank - 1) % n)
    chunks = torch.tensor_split(tensor, n)
    mine = chunks[rank].clone()
    sent = 0
    for step in range(n - 1):
        send_index, recv_index = (rank - 1 - step) % n, (rank - 2 - step) % n
        incoming = torch.empty_like(chunks[recv_index])
        ops = [dist.P2POp(dist.isend, chunks[send_index], to_next, group),  # the original, never a partial sum
               dist.P2POp(dist.irecv, incoming, from_prev, group)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        if recv_index == rank:
            mine += incoming
        sent += chunks[send_index].numel() * chunks[send_index].element_size()
    return mine, sent


def blocking_exchange(group, numel: int):
    """Every rank of ``group`` calls ``dist.send`` to rank + 1, then ``dist.recv`` from rank - 1.

    Returns ``(rank, "finished")``, or ``(rank, "timed out")`` when the group's timeout passed first.
    On gloo a send completes only once the peer has posted the matching receive (observed with
    10 elements as with 8 Mi), so when every rank sends first no rank ever reaches its receive.
    A rank whose peer timed out a moment earlier sees gloo's "Connection closed by peer" instead of
    its own timeout (the peer's timeout tore the connection down); it was stuck all the same.
    """
    torch, dist = torch_modules()
    rank, n = dist.get_rank(group), dist.get_world_size(group)
    incoming = torch.empty(numel)
    try:
        dist.send(torch.ones(numel), dist.get_global_rank(group, (rank + 1) % n), group=group)
        dist.recv(incoming, dist.get_global_rank(group, (rank - 1) % n), group=group)
    except RuntimeError as exc:
        message = str(exc).lower()
        if "timed out" not in message and "connection closed by peer" not in message:
            raise
        return rank, "timed out"
    return rank, "finished"


def p9_demo(numel: int, deadlock_timeout_s: float = 2.0) -> dict:
    """Run in each of 4 launched ranks: card 03 at world sizes 2, 3 and 4 on the same inputs.

    Rank k's input is ``numel`` float32 elements all equal to ``2**k``, so every element of a
    sum is a bit mask of the ranks whose data reached it (15 = ranks 0..3). For each world size
    n (the subgroup of ranks 0..n-1) this rank records: the widely copied version's chunk and
    bytes, ringlab's ring reduce-scatter chunk and bytes, ``dist.reduce_scatter`` (uneven
    chunks allowed), then ringlab's all-gather of the ring chunk (completing an all-reduce) with
    its bytes, and ``dist.all_reduce`` of the same input. Last, a blocking send-before-receive
    exchange in a group whose timeout is ``deadlock_timeout_s``.

    Returns ``{"results": {n: {name: value}}, "deadlock": (rank, "timed out" | "finished")}``
    with tensors as Python lists (picklable, CPU). Needs a launch of exactly 4 ranks (ValueError).
    """
    torch, dist = torch_modules()
    rank, world = dist.get_rank(), dist.get_world_size()
    if world != 4:
        raise ValueError(f"p9_demo needs world_size=4, got {world}")
    groups = {n: dist.new_group(list(range(n))) for n in (2, 3, 4)}  # every rank creates every group
    stuck = dist.new_group(list(range(world)), timeout=datetime.timedelta(seconds=deadlock_timeout_s))
    x = torch.full((numel,), float(2**rank))
    results = {}
    for n, group in groups.items():
        if rank >= n:
            continue
        wrong, wrong_sent = widely_copied_reduce_scatter(x, group)
        ring = run_ring_reduce_scatter(x, group=group)
        library = torch.empty_like(ring.output)
        dist.reduce_scatter(library, list(torch.tensor_split(x, n)), group=group)
        gathered = run_ring_all_gather(ring.output, group=group, numel=numel)
        reduced = x.clone()
        dist.all_reduce(reduced, group=group)
        results[n] = {"wrong": wrong.tolist(), "wrong_sent": wrong_sent, "ring": ring.output.tolist(),
                      "ring_sent": ring.bytes_sent, "library": library.tolist(), "gathered": gathered.output.tolist(),
                      "gather_sent": gathered.bytes_sent, "all_reduce": reduced.tolist()}
    deadlock = blocking_exchange(stuck, 16)
    dist.barrier()  # on the default group: no rank exits (closing its connections) while another still waits
    return {"results": results, "deadlock": deadlock}
