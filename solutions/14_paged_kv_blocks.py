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
        ### BEGIN SOLUTION
        self.block_size = block_size
        self.free_list = list(range(num_blocks))[::-1]  # pop() hands out low ids first
        self.ref = [0] * num_blocks
        self.key_of = {}  # block -> key, for full blocks that can be shared
        self.block_of = {}  # key -> block
        self.tables, self.tokens = {}, {}
        ### END SOLUTION

    @property
    def num_free_blocks(self):
        """Blocks no sequence holds."""
        ### BEGIN SOLUTION
        return len(self.free_list)
        ### END SOLUTION

    def block_table(self, seq_id):
        """Physical block ids of ``seq_id``, in token order (a list of ints)."""
        ### BEGIN SOLUTION
        return list(self.tables[seq_id])
        ### END SOLUTION

    def allocate(self, seq_id, token_ids):
        """Blocks for a new sequence holding ``token_ids`` (its prompt); share full blocks by key."""
        ### BEGIN SOLUTION
        bs, keys, parent = self.block_size, [], None
        for i in range(len(token_ids) // bs):
            parent = (parent, tuple(token_ids[i * bs:(i + 1) * bs]))  # the chain: the whole prefix
            keys.append(parent)
        partial = len(token_ids) % bs != 0
        need = sum(1 for k in keys if k not in self.block_of) + partial
        if need > len(self.free_list):
            raise OutOfBlocksError(f"{seq_id}: needs {need} blocks, {len(self.free_list)} free", need,
                                   len(self.free_list))
        table = []
        for key in keys:
            block = self.block_of.get(key)
            if block is None:
                block = self._take()
                self.block_of[key], self.key_of[block] = block, key
            else:
                self.ref[block] += 1
            table.append(block)
        if partial:
            table.append(self._take())
        self.tables[seq_id], self.tokens[seq_id] = table, list(token_ids)
        ### END SOLUTION

    def append_token(self, seq_id, token_id):
        """Add one decoded token: a new block at a block boundary, a copy if the last block is shared."""
        ### BEGIN SOLUTION
        table, tokens, bs = self.tables[seq_id], self.tokens[seq_id], self.block_size
        if len(tokens) % bs == 0 or self.ref[table[-1]] > 1:
            if not self.free_list:
                raise OutOfBlocksError(f"{seq_id}: no free block", 1, 0)
            if len(tokens) % bs == 0:
                table.append(self._take())
            else:  # copy-on-write: the sibling keeps the old block untouched
                self.ref[table[-1]] -= 1
                table[-1] = self._take()
        tokens.append(token_id)
        if len(tokens) % bs == 0:  # the block is full now: make it shareable
            parent = None
            for i in range(len(tokens) // bs):
                parent = (parent, tuple(tokens[i * bs:(i + 1) * bs]))
            if parent not in self.block_of:
                self.block_of[parent], self.key_of[table[-1]] = table[-1], parent
        ### END SOLUTION

    def fork(self, parent_id, child_id):
        """``child_id`` starts as a copy of ``parent_id`` sharing all of its blocks."""
        ### BEGIN SOLUTION
        for block in self.tables[parent_id]:
            self.ref[block] += 1
        self.tables[child_id] = list(self.tables[parent_id])
        self.tokens[child_id] = list(self.tokens[parent_id])
        ### END SOLUTION

    def free(self, seq_id):
        """Release ``seq_id``'s blocks (finished or preempted)."""
        ### BEGIN SOLUTION
        for block in self.tables.pop(seq_id):
            self.ref[block] -= 1
            if self.ref[block] == 0:
                key = self.key_of.pop(block, None)
                if key is not None:
                    del self.block_of[key]
                self.free_list.append(block)
        del self.tokens[seq_id]
        ### END SOLUTION

    def _take(self):
        ### BEGIN SOLUTION
        block = self.free_list.pop()
        self.ref[block] = 1
        return block
        ### END SOLUTION
