"""15a : plan one step of a continuous-batching scheduler: grow, preempt, admit.

Grade it: ``ringlab check 15a`` or, in a notebook, ``ringlab.check.grade("15a")``.
Hints: ``ringlab.check.hint("15a", 1)`` (2 and 3 say more).

The engine keeps a running batch and a waiting queue. Every step each running request decodes one
token, and some of them start a new KV block with it. Blocks are scarce: get the order wrong and a
request is prefilled, evicted and prefilled again for ever (notebook 15 shows it happen).
"""


def plan_step(running, waiting, free_blocks, watermark_blocks=0):
    """Decide one step under the fixed policy.

    Args:
        running: list of dicts, oldest first: ``{"id": int, "blocks": int (held), "needs_block": bool}``;
            ``needs_block`` is True when this step's token starts a new block.
        waiting: list of dicts in queue order: ``{"id": int, "blocks": int}`` (blocks its prompt needs).
        free_blocks: free blocks now (int >= 0).
        watermark_blocks: blocks admission must leave free (int >= 0).

    Rules, in this order:
      1. Running requests, oldest first: one that needs a block takes a free one. If none is free,
         preempt (by recompute) the newest running request not yet preempted, which frees all its blocks,
         and repeat; the newest may be the requester itself, which then does not decode.
         Every running request that was not preempted decodes.
      2. Then admit waiting requests in queue order while ``blocks + 1 <= free - watermark_blocks``
         (the + 1 reserves the first decode block); stop at the first that does not fit. Requests
         preempted in this step wait for the next one.

    Returns:
        ``{"decode": [...ids in order], "preempt": [...ids in the order preempted], "admit": [...ids]}``.
    """
    ### BEGIN SOLUTION
    alive = list(running)
    free, decode, preempt = free_blocks, [], []
    for request in list(alive):
        if request not in alive:  # preempted by an older request of this step
            continue
        if request["needs_block"]:
            while free == 0:
                victim = alive.pop()  # the newest: the oldest always progresses
                preempt.append(victim["id"])
                free += victim["blocks"]
                if victim is request:
                    break
            if request not in alive:
                continue
            free -= 1
        decode.append(request["id"])
    admit = []
    for request in waiting:
        if request["blocks"] + 1 > free - watermark_blocks:  # no room for its first decode token
            break
        admit.append(request["id"])
        free -= request["blocks"]
    return {"decode": decode, "preempt": preempt, "admit": admit}
    ### END SOLUTION
