"""14a : the block allocator behind a paged KV cache, with prefix sharing and copy-on-write.

Grade it: ``ringlab check 14a`` or, in a notebook, ``ringlab.check.grade("14a")``.
Hints: ``ringlab.check.hint("14a", 1)`` (2 and 3 say more).

The grader runs sequences of allocate / append_token / fork / free on your allocator and on
ringlab's own (``ringlab.serving.BlockManager``) and compares, after every call, the free-block
count and which sequences share which physical blocks (the block ids themselves may differ).
"""

from ringlab.serving import OutOfBlocksError


class BlockAllocator:
    """A pool of ``num_blocks`` blocks of ``block_size`` token slots; token ``i`` of a sequence lives
    in its block table's entry ``i // block_size``.

    Rules:
      - A *full* block is shared between sequences when everything up to its end is equal: give
        each full block a key made of its tokens and the key of the block before it (a chain), and
        reuse the block already holding that key. A partial block is never shared this way.
      - ``fork(parent, child)``: the child's table is the parent's; every block is now held twice.
      - Writing a token into a block that another table also holds first copies that block
        (copy-on-write); only that one block is copied.
      - A block returns to the free pool when no table holds it any more (reference counts).
      - When there are not enough free blocks, raise ``OutOfBlocksError`` and change nothing.
    """

    def __init__(self, num_blocks, block_size):
        raise NotImplementedError("14a: replace this line with your code")

    @property
    def num_free_blocks(self):
        """Blocks no sequence holds."""
        raise NotImplementedError("14a: replace this line with your code")

    def block_table(self, seq_id):
        """Physical block ids of ``seq_id``, in token order (a list of ints)."""
        raise NotImplementedError("14a: replace this line with your code")

    def allocate(self, seq_id, token_ids):
        """Blocks for a new sequence holding ``token_ids`` (its prompt); share full blocks by key."""
        raise NotImplementedError("14a: replace this line with your code")

    def append_token(self, seq_id, token_id):
        """Add one decoded token: a new block at a block boundary, a copy if the last block is shared."""
        raise NotImplementedError("14a: replace this line with your code")

    def fork(self, parent_id, child_id):
        """``child_id`` starts as a copy of ``parent_id`` sharing all of its blocks."""
        raise NotImplementedError("14a: replace this line with your code")

    def free(self, seq_id):
        """Release ``seq_id``'s blocks (finished or preempted)."""
        raise NotImplementedError("14a: replace this line with your code")

    def _take(self):
        raise NotImplementedError("14a: replace this line with your code")
