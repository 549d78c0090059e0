"""The paged KV block allocator: P13's numbers, prefix sharing, copy-on-write, LRU cache, errors, and a
hypothesis state machine whose model of every sequence's tokens is kept apart from the allocator."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, multiple, precondition, rule

from ringlab.serving import BlockManager, InvariantError, OutOfBlocksError, block_bytes, pool_blocks
from ringlab.serving.blocks import POLICIES, FreeQueue


def ceil_div(a, b):
    return -(-a // b)


# ---- P13's worked numbers (typed from PROBLEMS.md) ---------------------------------------------------

def test_llama2_7b_block_and_pool_sizes():
    assert block_bytes("llama-2-7b", 16, "fp16") == 8_388_608 == 8 * 2**20  # 524,288 B/token x 16
    assert block_bytes("llama-2-7b", 1, "fp16") == 524_288
    assert pool_blocks(60 * 2**30, "llama-2-7b", 16, "fp16") == 7_680
    assert pool_blocks(60 * 2**30, "llama-2-7b", 16, "fp16") * 16 == 122_880


def test_hundred_requests_share_the_62_full_blocks_of_a_1000_token_prompt():
    bm = BlockManager(7_680, 16)
    prompt = list(range(1_000))
    tables = [bm.allocate(i, prompt) for i in range(100)]
    assert bm.prefix_cache_hits == 99 * 62 == 6_138
    assert bm.num_used_blocks == 62 + 100  # shared full blocks + one partial block each
    assert 100 * ceil_div(1_000, 16) - bm.num_used_blocks == 6_138
    assert all(t[:62] == tables[0][:62] for t in tables)
    assert len({t[62] for t in tables}) == 100  # the 8-token partial block is never shared by hash
    bm.check_invariants()


def test_requests_admitted_in_the_same_step_share_blocks():
    """nano-vllm's reported bug: two identical prompts scheduled together got duplicate blocks."""
    bm = BlockManager(16, 4)
    prompt = list(range(8))
    assert bm.blocks_needed([prompt, prompt]) == 2 + 0  # the second finds the first's blocks
    assert bm.can_allocate(prompt, prompt)
    bm.allocate("a", prompt)
    bm.allocate("b", prompt)
    assert bm.block_table("a") == bm.block_table("b") and bm.num_used_blocks == 2


def test_equal_blocks_after_different_prefixes_never_merge():
    bm = BlockManager(16, 4)
    bm.allocate("x", [1, 2, 3, 4, 9, 9, 9, 9])
    bm.allocate("y", [5, 6, 7, 8, 9, 9, 9, 9])  # same last block, different prefix
    assert bm.prefix_cache_hits == 0
    assert bm.block_table("x")[1] != bm.block_table("y")[1]
    bm.allocate("z", [1, 2, 3, 4, 9, 9, 9, 9, 1])
    assert bm.block_table("z")[:2] == bm.block_table("x") and bm.prefix_cache_hits == 2


def test_a_partial_block_is_never_shared_by_hash():
    bm = BlockManager(16, 4)
    bm.allocate("a", [1, 2, 3])
    bm.allocate("b", [1, 2, 3])
    assert bm.prefix_cache_hits == 0 and bm.block_table("a") != bm.block_table("b")


def test_a_block_filled_by_decoding_becomes_shareable():
    bm = BlockManager(16, 4)
    bm.allocate("a", [1, 2, 3])
    bm.append_token("a", 4)
    bm.allocate("b", [1, 2, 3, 4, 5])
    assert bm.block_table("b")[0] == bm.block_table("a")[0] and bm.prefix_cache_hits == 1


# ---- copy-on-write ---------------------------------------------------------------------------------

def test_fork_copies_exactly_the_shared_partial_block_once_per_writer_but_the_last():
    bm = BlockManager(32, 4)
    bm.allocate(0, [1, 2, 3, 4, 5, 6])  # one full block, one partial
    for child in (1, 2, 3):
        bm.fork(0, child)
    assert bm.num_used_blocks == 2
    copies = [bm.append_token(s, 10 + s) for s in (0, 1, 2, 3)]
    assert bm.copies == 3  # n sharers: n - 1 copies; the last writer owns the block by then
    assert copies[3] is None and all(c is not None and c[0] == bm.block_table(3)[1] for c in copies[:3])
    assert bm.num_used_blocks == 2 + 3
    assert len({bm.block_table(s)[0] for s in range(4)}) == 1  # the full block stays shared
    assert [bm.tokens(s) for s in range(4)] == [[1, 2, 3, 4, 5, 6, 10 + s] for s in range(4)]
    assert bm.take_pending_copies() == copies[:3] and bm.take_pending_copies() == []
    bm.check_invariants()


def test_fork_on_a_block_boundary_copies_nothing():
    bm = BlockManager(32, 4)
    bm.allocate(0, [1, 2, 3, 4])
    bm.fork(0, 1)
    bm.append_token(0, 7)
    bm.append_token(1, 8)
    assert bm.copies == 0 and bm.num_used_blocks == 3


def test_without_copy_on_write_a_fork_would_corrupt_its_sibling():
    """What the copy protects: the sibling's view of the shared block is unchanged after the write."""
    bm = BlockManager(32, 4)
    bm.allocate(0, [1, 2])
    bm.fork(0, 1)
    before = bm.block_table(1)
    bm.append_token(0, 3)
    assert bm.block_table(1) == before and bm.block_table(0) != before
    assert bm.tokens(1) == [1, 2]


# ---- freeing, the LRU cache, the watermark, errors ---------------------------------------------------

def test_freed_blocks_stay_findable_until_evicted_least_recently_freed_first():
    bm = BlockManager(4, 2)
    bm.allocate("a", [1, 2, 3, 4])
    bm.free("a")
    assert bm.num_free_blocks == 4 and bm.num_cached_free_blocks == 2
    bm.allocate("b", [1, 2, 3, 4, 5])
    assert bm.prefix_cache_hits == 2
    bm.free("b")  # frees the partial block (plain), then [3, 4], then [1, 2]: tail first
    bm.allocate("c", [9, 9, 9, 9, 9, 9, 9, 9])  # needs all 4: plain ones first, then evicts LRU
    assert bm.evictions == 2
    bm.free("c")
    bm.check_invariants()


def test_tail_blocks_are_evicted_before_the_head_of_a_prefix():
    bm = BlockManager(3, 2)
    bm.allocate("a", [1, 2, 3, 4, 5, 6])
    bm.free("a")  # evictor order: [5,6], [3,4], [1,2]
    bm.allocate("x", [7])  # no plain free block: evicts the least recently freed, the tail [5, 6]
    bm.free("x")
    assert bm.evictions == 1
    bm.allocate("b", [1, 2, 3, 4, 8])
    assert bm.prefix_cache_hits == 2  # head and middle survived


def test_watermark_holds_back_admission_but_not_growth():
    bm = BlockManager(4, 2, watermark_blocks=1)
    assert bm.can_allocate([1, 2, 3, 4, 5, 6]) and not bm.can_allocate([1] * 7)
    bm.allocate("a", [1, 2, 3, 4, 5, 6])
    with pytest.raises(OutOfBlocksError) as err:
        bm.allocate("b", [8])
    assert err.value.needed == 1 and err.value.available == 0 and not err.value.never
    bm.append_token("a", 7)  # growth may use the watermark block
    assert bm.num_free_blocks == 0


def test_out_of_blocks_leaves_the_books_unchanged():
    bm = BlockManager(2, 2)
    bm.allocate("a", [1, 2, 3, 4])
    with pytest.raises(OutOfBlocksError, match="needs a new block"):
        bm.append_token("a", 5)
    assert bm.tokens("a") == [1, 2, 3, 4]
    with pytest.raises(OutOfBlocksError, match="can never fit") as err:
        BlockManager(2, 2).allocate("z", [1] * 5)
    assert err.value.never
    bm.check_invariants()


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="num_blocks"):
        BlockManager(0, 16)
    with pytest.raises(TypeError, match="block_size"):
        BlockManager(8, 1.5)
    with pytest.raises(ValueError, match="check the units"):
        BlockManager(2**40, 16)
    with pytest.raises(ValueError, match="watermark_blocks"):
        BlockManager(8, 16, watermark_blocks=8)
    bm = BlockManager(8, 4)
    with pytest.raises(ValueError, match="empty"):
        bm.allocate(0, [])
    bm.allocate(0, [1])
    with pytest.raises(ValueError, match="already holds"):
        bm.allocate(0, [1])
    with pytest.raises(ValueError, match="unknown sequence"):
        bm.free(1)
    with pytest.raises(ValueError, match="unknown sequence"):
        bm.fork(5, 6)


def test_invariant_check_catches_a_leak_and_a_wrong_ref_count():
    bm = BlockManager(4, 2)
    bm.allocate("a", [1, 2, 3])
    bm._ref[bm.block_table("a")[0]] += 1
    with pytest.raises(InvariantError, match="ref count"):
        bm.check_invariants()
    bm = BlockManager(4, 2)
    bm.allocate("a", [1, 2, 3])
    del bm._tables["a"], bm._tokens["a"], bm._keys["a"]  # forgotten without freeing
    with pytest.raises(InvariantError):
        bm.check_invariants()


PROMPTS = st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=20), min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(PROMPTS, PROMPTS, st.integers(1, 5), st.sampled_from(POLICIES))
def test_blocks_needed_predicts_allocate_exactly(prompts, warm, block_size, policy):
    # a batch of prompts that share blocks with each other (small alphabet), with held blocks and with cached
    # free ones; the pool has room for all: 12 prompts of at most 20 tokens
    bm = BlockManager(256, block_size, policy=policy)
    for i, p in enumerate(warm):
        bm.allocate(("warm", i), p)
    for i in range(0, len(warm), 2):
        bm.free(("warm", i))
    predicted = bm.blocks_needed(prompts)
    batch = (set(), set()) if len(prompts) > 1 else None  # the one-key-at-a-time count agrees with the bulk one
    looped = 0
    for p in prompts:
        keys, partial, _ = bm._prompt_keys(p, None)
        looped += bm._look_up(p, keys, partial, False, batch)[2]
    assert looped == predicted
    free = bm.num_free_blocks
    for i, p in enumerate(prompts):
        bm.allocate(i, p)
    assert free - bm.num_free_blocks == predicted
    bm.check_invariants()


# ---- the state machine -----------------------------------------------------------------------------

class BlockMachine(RuleBasedStateMachine):
    """Random allocate / append / fork / free / preempt / resume against a plain model of the tokens."""

    live = Bundle("live")
    preempted = Bundle("preempted")

    def __init__(self):
        super().__init__()
        self.bm = None
        self.model: dict[int, list] = {}  # live sequence -> its tokens
        self.parked: dict[int, list] = {}  # preempted sequence -> tokens to recompute
        self.ever_full: set[tuple] = set()  # every prefix that has been a full block
        self.next_id = 0

    @rule(num_blocks=st.integers(4, 24), block_size=st.integers(1, 4), caching=st.booleans())
    @precondition(lambda self: self.bm is None)
    def start(self, num_blocks, block_size, caching):
        self.bm = BlockManager(num_blocks, block_size, enable_prefix_caching=caching)

    def _note_full(self, tokens):
        bs = self.bm.block_size
        for i in range(len(tokens) // bs):
            self.ever_full.add(tuple(tokens[:(i + 1) * bs]))

    def _new(self, tokens):
        bs, seq = self.bm.block_size, self.next_id
        held = {tuple(t[:(i + 1) * bs]) for t in self.model.values() for i in range(len(t) // bs)}
        prefixes = [tuple(tokens[:(i + 1) * bs]) for i in range(len(tokens) // bs)]
        caching = self.bm.enable_prefix_caching
        expected_hits = sum(1 for p in prefixes if caching and p in self.ever_full)
        held_hits = sum(1 for p in prefixes if caching and p in held)
        hits, used = self.bm.prefix_cache_hits, self.bm.num_used_blocks
        fits = self.bm.can_allocate(tokens)
        try:
            self.bm.allocate(seq, tokens)
        except OutOfBlocksError:
            assert not fits
            return None
        assert fits
        if self.bm.evictions == 0:  # nothing ever forgotten: every full prefix seen is still cached
            assert self.bm.prefix_cache_hits - hits == expected_hits
            assert self.bm.num_used_blocks - used == ceil_div(len(tokens), bs) - held_hits
        self.next_id += 1
        self.model[seq] = list(tokens)
        self._note_full(tokens)
        return seq

    @rule(target=live, tokens=st.lists(st.integers(0, 2), min_size=1, max_size=12))
    @precondition(lambda self: self.bm is not None)
    def allocate(self, tokens):
        seq = self._new(tokens)
        return seq if seq is not None else multiple()  # nothing created: the bundle gets no value

    @rule(seq=live, token=st.integers(0, 2))
    def append(self, seq, token):
        if seq not in self.model:
            return
        tokens, bs = self.model[seq], self.bm.block_size
        filled = tuple(tokens) + (token,) if (len(tokens) + 1) % bs == 0 else None
        twin_held = self.bm.enable_prefix_caching and filled is not None and any(
            tuple(t[:len(filled)]) == filled for s, t in self.model.items() if s != seq)
        last = self.bm.block_table(seq)[-1]
        shared_partial = len(tokens) % bs != 0 and self.bm.ref_count(last) > 1
        used, copies = self.bm.num_used_blocks, self.bm.copies
        try:
            copy = self.bm.append_token(seq, token)
        except OutOfBlocksError:
            assert self.bm.num_free_blocks == 0
            return
        grows = len(tokens) % bs == 0 or shared_partial
        assert self.bm.num_used_blocks - used == int(grows) - int(twin_held)  # a twin: the new block is freed
        assert self.bm.copies - copies == int(shared_partial) and (copy is not None) == shared_partial
        tokens.append(token)
        self._note_full(tokens)

    @rule(target=live, parent=live)
    def fork(self, parent):
        if parent not in self.model:
            return multiple()  # nothing created: the bundle gets no value
        child, used = self.next_id, self.bm.num_used_blocks
        self.next_id += 1
        self.bm.fork(parent, child)
        assert self.bm.num_used_blocks == used  # a fork takes no block
        self.model[child] = list(self.model[parent])
        return child

    @rule(seq=consumes(live))
    def free(self, seq):
        if seq in self.model:
            self.bm.free(seq)
            del self.model[seq]

    @rule(target=preempted, seq=consumes(live))
    def preempt(self, seq):
        if seq not in self.model:
            return multiple()  # nothing created: the bundle gets no value
        self.bm.free(seq)
        self.parked[seq] = self.model.pop(seq)
        return seq

    @rule(target=live, seq=consumes(preempted))
    def resume(self, seq):
        tokens = self.parked.pop(seq)
        new = self._new(tokens)  # recompute: a new sequence holding the same tokens
        return new if new is not None else multiple()  # nothing created: the bundle gets no value

    @invariant()
    def books_balance(self):
        if self.bm is None:
            return
        self.bm.check_invariants()
        bs = self.bm.block_size
        content: dict[int, tuple] = {}
        for seq, tokens in self.model.items():
            assert self.bm.tokens(seq) == tokens
            table = self.bm.block_table(seq)
            assert len(table) == ceil_div(len(tokens), bs)
            for i, block in enumerate(table):
                seen = tuple(tokens[:(i + 1) * bs])  # a block's KV depends on everything before it too
                assert content.setdefault(block, seen) == seen, "one block, two different contents"
        assert self.bm.num_used_blocks == len(content)
        if not self.model:
            assert self.bm.num_free_blocks == self.bm.num_blocks


TestBlockMachine = BlockMachine.TestCase
TestBlockMachine.settings = settings(max_examples=150, stateful_step_count=40)


# ---- the bulk fill against the one-key-at-a-time fill ----------------------------------------------------

class _OneAtATime(BlockManager):
    """The reference: every prompt is filled one key at a time (:meth:`BlockManager._fill`)."""

    def _fill_in_bulk(self, table, keys, partial, found=None):
        return False


def _books(bm):
    return ({s: bm.block_table(s) for s in bm.sequences()}, list(bm._free), list(bm._lru),
            list(bm._key), [bm.ref_count(b) for b in range(bm.num_blocks)], bm.prefix_cache_hits, bm.evictions)


def _same_run(ops, num_blocks, block_size, caching):
    """Run ``ops`` on both allocators and check their books are equal after each (block ids included)."""
    bulk = BlockManager(num_blocks, block_size, enable_prefix_caching=caching)
    ref = _OneAtATime(num_blocks, block_size, enable_prefix_caching=caching)
    for op, seq, tokens in ops:
        outcomes = []
        for bm in (bulk, ref):
            try:
                if op == "allocate" and seq not in bm.sequences():
                    bm.allocate(seq, tokens)
                elif op == "append" and seq in bm.sequences():
                    bm.append_token(seq, tokens[0])
                elif op == "free" and seq in bm.sequences():
                    bm.free(seq)
                outcomes.append("ok")
            except OutOfBlocksError as error:
                outcomes.append(str(error))
        assert outcomes[0] == outcomes[1]
        assert _books(bulk) == _books(ref)
        bulk.check_invariants()


_ops = st.lists(st.tuples(st.sampled_from(["allocate", "allocate", "append", "free"]), st.integers(0, 5),
                          st.lists(st.integers(0, 3), min_size=1, max_size=14)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(_ops, st.integers(3, 20), st.integers(1, 3), st.booleans())
def test_the_bulk_fill_gives_the_books_of_the_one_key_at_a_time_fill(ops, num_blocks, block_size, caching):
    # same block ids in the same tables, same LRU order of cached free blocks, same counters, after every call
    _same_run(ops, num_blocks, block_size, caching)


def test_the_bulk_fill_steps_aside_for_a_hit_after_a_miss():
    # under uncached-first a cached key's parent is always cached, so a prompt's hits come first; the bulk
    # fill still refuses keys where a hit follows a miss (a take could evict it) and leaves them to _fill
    bm = BlockManager(8, 1)
    bm.allocate("a", [1, 2, 3])
    bm.free("a")
    cached_key = bm._prompt_keys([1, 2, 3])[0][1]
    assert not bm._fill_in_bulk([], [("not", "cached"), cached_key], 0)
    assert bm.num_free_blocks == 8 and bm.prefix_cache_hits == 0  # nothing done
    table = []
    bm._fill(table, [("not", "cached"), cached_key], [False, True], 0)
    assert table[1] == bm._cached[cached_key] and bm.prefix_cache_hits == 1


# ---- the free queue ---------------------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(st.integers(1, 12), st.lists(st.tuples(st.sampled_from(["extend", "remove", "pop"]), st.integers(0, 11),
                                              st.integers(0, 4)), max_size=300))
def test_the_free_queue_is_a_list_in_lru_order(num_blocks, ops):
    # model: a plain list, oldest first; removal from the middle is list.remove, popping is slicing the front
    queue, model = FreeQueue(num_blocks, range(num_blocks // 2)), list(range(num_blocks // 2))
    for op, block, count in ops:
        block %= num_blocks
        if op == "extend":
            out = [b for b in range(block, min(block + count, num_blocks)) if b not in model]
            queue.extend(out)
            model += out
        elif op == "remove" and block in model:
            queue.remove(block)
            model.remove(block)
        elif op == "pop":
            count = min(count, len(model))
            assert queue.pop_many(count) == model[:count]
            del model[:count]
        assert len(queue) == len(model) and list(queue) == model


def test_the_free_queue_stays_short_under_touches():
    # a block removed and appended again 100,000 times leaves stale entries behind; the queue is rebuilt
    # when they outnumber the live ones, so its deque stays within a constant of the pool
    queue = FreeQueue(8, range(8))
    for _ in range(100_000):
        queue.remove(3)
        queue.extend([3])
    assert list(queue) == [0, 1, 2, 4, 5, 6, 7, 3] and len(queue._items) <= 4 * 8 + 1024 + 1
