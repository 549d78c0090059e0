"""21a: replay a production trace's prompts through a prefix cache, as vLLM v1 does, and give its hit rate.

Grade it: ``ringlab check 21a`` or, in a notebook, ``ringlab.check.grade("21a")``.
Hints: ``ringlab.check.hint("21a", 1)`` (2 and 3 say more).
"""

from collections import OrderedDict


def prefix_hit_rate(requests, num_blocks):
    """The fraction of the listed KV blocks that a pool of ``num_blocks`` blocks serves from its prefix cache.

    Each request is the list of hash ids of its prompt's full blocks, in order (ints, distinct within a
    request). In a production trace such as Mooncake's the ids are chained: an id fixes its block and the
    whole prefix before it, so two prompts share a block only when they share everything up to it.

    Requests are served one at a time, in order, as vLLM v1's block pool serves them:

    1. Look up the longest prefix of the request whose ids are all cached: those blocks are hits. Stop at
       the first miss; an id cached further on is a miss too (vLLM only matches prefixes).
    2. The hit blocks leave the free queue. Every other block is fresh: one per missed id, then one more
       for the prompt's partial last block (prompts rarely end on a block boundary). A fresh block is taken
       from the head of the free queue (the least recently used), and whatever id it cached is evicted;
       it then caches the missed id. The partial block caches nothing and is not counted as listed.
    3. The request finishes and frees all its blocks onto the tail of the queue, its last block first, so
       a prefix's head is freed last and is evicted after its tail.

    At the start all ``num_blocks`` blocks are free and cache nothing; the queue starts in block order.

    Worked example, ``num_blocks=4``, ``requests=[[1, 2], [1, 3], [1, 2]]``: request 1 misses both ids and
    takes blocks 0, 1 (ids 1, 2) and 2 (partial); it frees 2, 1, 0, so the queue is [3, 2, 1, 0]. Request 2
    hits id 1 (block 0), takes block 3 for id 3 and block 2 for its partial block, and frees 2, 3, 0: the
    queue is [1, 2, 3, 0]. Request 3 hits id 1 and id 2 (block 1, still cached). Hits 0 + 1 + 2 = 3 of 6
    listed blocks: 0.5. With ``num_blocks=3`` the queue after request 1 is [2, 1, 0]; request 2 takes block
    2 for id 3 and block 1 for its partial block, evicting id 2, so request 3 hits id 1 only: 2 of 6, 0.333.

    Args:
        requests: the trace in arrival order: a list of lists of int block ids, at least one id in all.
        num_blocks: blocks in the pool (int, at least 1 + the longest request's length, so that any one
            request fits).

    Returns:
        hit blocks / listed blocks (a float in [0, 1]).
    """
    raise NotImplementedError("21a: replace this line with your code")
