"""BlockManager(policy="vllm-v1") against a minimal model of vLLM v1's prefix cache written here, hand-worked
cases where the two policies part, extra keys, and prompts that bring their own block keys."""

from __future__ import annotations

from collections import OrderedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.serving import BlockManager, OutOfBlocksError


class V1Model:
    """vLLM v1 as its design doc tells it: hash -> blocks (first registered found first), one free queue in
    LRU order, touch on a hit, new blocks from the head (evicting), frees appended last block first, no dedup.
    A block's hash is the nested tuple (parent hash, tokens, extra keys): equal exactly when the prefixes are."""

    def __init__(self, num_blocks, block_size):
        self.bs = block_size
        self.queue = OrderedDict((b, None) for b in range(num_blocks))
        self.hash_of = [None] * num_blocks
        self.by_hash: dict = {}  # hash -> {block: None} in registration order
        self.ref = [0] * num_blocks
        self.seqs: dict = {}  # seq -> [blocks, tokens, hashes, extra]
        self.hits = self.evictions = 0

    def _hash(self, parent, tokens, extra):
        return (parent, tuple(tokens), extra)

    def _pop(self):
        block = next(iter(self.queue))
        del self.queue[block]
        h = self.hash_of[block]
        if h is not None:
            del self.by_hash[h][block]
            if not self.by_hash[h]:
                del self.by_hash[h]
            self.hash_of[block] = None
            self.evictions += 1
        self.ref[block] = 1
        return block

    def _cache(self, block, h):
        self.hash_of[block] = h
        self.by_hash.setdefault(h, {})[block] = None

    def allocate(self, seq, tokens, extra=None):
        bs = self.bs
        hashes, parent = [], None
        for i in range(len(tokens) // bs):
            parent = self._hash(parent, tokens[i * bs:(i + 1) * bs], extra)
            hashes.append(parent)
        hit = []
        for h in hashes[:(len(tokens) - 1) // bs]:  # the last token is always computed
            if h not in self.by_hash:
                break
            hit.append(next(iter(self.by_hash[h])))
        total = -(-len(tokens) // bs)
        if sum(self.ref[b] == 0 for b in hit) + total - len(hit) > len(self.queue):
            return False
        for b in hit:
            if self.ref[b] == 0:
                del self.queue[b]
            self.ref[b] += 1
        new = [self._pop() for _ in range(total - len(hit))]
        blocks = hit + new
        for i in range(len(hit), len(hashes)):
            self._cache(blocks[i], hashes[i])
        self.hits += len(hit)
        self.seqs[seq] = [blocks, list(tokens), hashes, extra]
        return True

    def append(self, seq, token):
        blocks, tokens, hashes, extra = self.seqs[seq]
        if len(tokens) % self.bs == 0:
            if not self.queue:
                return False
            blocks.append(self._pop())
        tokens.append(token)
        if len(tokens) % self.bs == 0:
            hashes.append(self._hash(hashes[-1] if hashes else None, tokens[-self.bs:], extra))
            self._cache(blocks[-1], hashes[-1])
        return True

    def free(self, seq):
        for b in reversed(self.seqs.pop(seq)[0]):
            self.ref[b] -= 1
            if self.ref[b] == 0:
                self.queue[b] = None


def _same(bm: BlockManager, model: V1Model):
    assert bm.prefix_cache_hits == model.hits and bm.evictions == model.evictions
    assert {s: bm.block_table(s) for s in bm.sequences()} == {s: v[0] for s, v in model.seqs.items()}
    assert bm.cached_block_ids() == [b for b, h in enumerate(model.hash_of) if h is not None]
    assert bm.num_free_blocks == len(model.queue)
    # the free queue's order, seen through which of its entries carry a key
    assert [h is not None for h in bm.fingerprint()[-1]] == [model.hash_of[b] is not None for b in model.queue]
    bm.check_invariants()


ops = st.lists(st.one_of(
    st.tuples(st.just("allocate"), st.lists(st.integers(0, 1), min_size=1, max_size=8),
              st.sampled_from([None, "lora-1"])),
    st.tuples(st.just("append"), st.integers(0, 7), st.integers(0, 2)),
    st.tuples(st.just("free"), st.integers(0, 7))), min_size=10, max_size=40)


@settings(max_examples=100, deadline=None)
@given(st.integers(3, 12), st.integers(1, 3), ops)
def test_vllm_v1_policy_matches_the_model(num_blocks, block_size, steps):
    bm, model = BlockManager(num_blocks, block_size, policy="vllm-v1"), V1Model(num_blocks, block_size)
    next_id = 0
    for op in steps:
        live = sorted(model.seqs)
        if op[0] == "allocate":
            ok = model.allocate(next_id, op[1], op[2])
            try:
                bm.allocate(next_id, op[1], extra_keys=op[2])
            except OutOfBlocksError:
                assert not ok
            else:
                assert ok
            next_id += 1
        elif live and op[0] == "append":
            seq = live[op[1] % len(live)]
            ok = model.append(seq, op[2])
            try:
                bm.append_token(seq, op[2])
            except OutOfBlocksError:
                assert not ok
            else:
                assert ok
        elif live:
            seq = live[op[1] % len(live)]
            model.free(seq)
            bm.free(seq)
        _same(bm, model)


# ---- hand-worked cases where the policies part -------------------------------------------------------------

def test_a_freed_partial_block_is_recycled_first_only_by_uncached_first():
    """Pool of 4 blocks of 2 tokens. "a" = [1,2,3,4] fills blocks 0, 1 and frees them (1 first, then 0);
    "b" = [7] takes block 2 (partial) and frees it. "c" = [8,8,8] then needs 2 blocks (and frees them):
    uncached-first takes the never-used 3 and b's partial 2, keeping a's prefix whole: "d" = [1,2,3,4,5]
    hits both its full blocks. vllm-v1's queue is [3, 1, 0, 2] (b's block went to the tail), so c takes 3 and
    1, evicting a's second block: d hits [1,2] only and fills [3,4] again."""
    hits = {}
    for policy in ("uncached-first", "vllm-v1"):
        bm = BlockManager(4, 2, policy=policy)
        bm.allocate("a", [1, 2, 3, 4])
        bm.free("a")
        bm.allocate("b", [7])
        bm.free("b")
        bm.allocate("c", [8, 8, 8])
        hits[policy] = (bm.block_table("c"), bm.evictions)
        bm.free("c")
        before = bm.prefix_cache_hits
        bm.allocate("d", [1, 2, 3, 4, 5])
        hits[policy] += (bm.prefix_cache_hits - before,)
        bm.check_invariants()
    assert hits == {"uncached-first": ([3, 2], 0, 2), "vllm-v1": ([3, 1], 1, 1)}


def test_a_prompt_on_a_block_boundary_recomputes_its_last_block_under_vllm_v1():
    """[1,2,3,4] in blocks of 2, twice while the first is held: uncached-first shares both blocks; vllm-v1
    caps the hit at (4 - 1) // 2 = 1 block and fills a second block with key [1,2 | 3,4]. A later
    [1,2,3,4,5] finds the first registered of the two (block 1), as vLLM's get_cached_block does."""
    shared = BlockManager(8, 2)
    shared.allocate("a", [1, 2, 3, 4])
    assert shared.allocate("b", [1, 2, 3, 4]) == [0, 1] and shared.prefix_cache_hits == 2
    bm = BlockManager(8, 2, policy="vllm-v1")
    assert bm.allocate("a", [1, 2, 3, 4]) == [0, 1]
    assert bm.cached_tokens([1, 2, 3, 4]) == 2 and bm.cached_tokens([1, 2, 3, 4, 5]) == 4
    assert bm.allocate("b", [1, 2, 3, 4]) == [0, 2] and bm.prefix_cache_hits == 1
    assert bm.cached_block_ids() == [0, 1, 2]  # two blocks carry the same key: no deduplication
    bm.check_invariants()
    bm.free("a")
    bm.free("b")
    assert bm.allocate("c", [1, 2, 3, 4, 5]) == [0, 1, 3] and bm.prefix_cache_hits == 3
    bm.check_invariants()


def test_the_design_docs_duplicated_blocks():
    """vLLM's "Automatic Prefix Caching" design doc, "Duplicated blocks": blocks of 4, prompt ABCDEF decoding
    G, H, I, then the same request again: v1 keeps table [0, 3] and caches block 3 beside block 1 ("Cache
    Blocks: 0, 1, 3"); v0 (here uncached-first) would switch the table to [0, 1]."""
    A, B, C, D, E, F, G, H, I = range(9)  # the doc's letters
    for policy, table, cached in (("vllm-v1", [0, 3], [0, 1, 3]), ("uncached-first", [0, 1], [0, 1])):
        bm = BlockManager(10, 4, policy=policy)
        bm.allocate(1, [A, B, C, D, E, F])
        for token in (G, H, I):
            bm.append_token(1, token)
        assert bm.block_table(1) == [0, 1, 2] and bm.cached_block_ids() == [0, 1]
        bm.allocate(2, [A, B, C, D, E, F])
        assert bm.block_table(2) == [0, 3]
        bm.append_token(2, G)
        bm.append_token(2, H)
        assert (bm.block_table(2), bm.cached_block_ids()) == (table, cached)
        bm.check_invariants()


def test_the_design_docs_worked_example():
    """The design doc's "Example", 10 blocks of 4 tokens: request 0 (15 prompt tokens) decodes 2 tokens,
    request 1 (14 tokens, the first 10 as request 0's) hits 2 blocks, both finish, and the free queue reads
    7 - 8 - 9 - 4 - 3 - 2 - 6 - 5 - 1 - 0. Request 2 (29 tokens, the first 12 as request 0's) gets "0
    (cached), 1 (cached), 2 (cached), 7, 8, 9, 4, 3 (evicted)". Uncached-first takes the never-used 7, 8, 9
    and the partial blocks 4 and 6 instead, evicting nothing."""
    r0 = list(range(15))
    for policy, table, evictions in (("vllm-v1", [0, 1, 2, 7, 8, 9, 4, 3], 1),
                                     ("uncached-first", [0, 1, 2, 7, 8, 9, 4, 6], 0)):
        bm = BlockManager(10, 4, policy=policy)
        assert bm.allocate(0, r0) == [0, 1, 2, 3] and bm.cached_block_ids() == [0, 1, 2]  # time 1
        bm.append_token(0, 15)  # block 3 fills and is cached
        bm.append_token(0, 16)  # time 3: a new block 4
        assert bm.block_table(0) == [0, 1, 2, 3, 4] and bm.cached_block_ids() == [0, 1, 2, 3]
        assert bm.allocate(1, r0[:10] + [100, 101, 102, 103]) == [0, 1, 5, 6]  # time 4
        assert bm.prefix_cache_hits == 2
        bm.free(0)  # time 5
        bm.free(1)  # time 6
        if policy == "vllm-v1":  # the free queue, through which entries carry a key (4 and 6 are partial)
            order = [7, 8, 9, 4, 3, 2, 6, 5, 1, 0]
            assert [h is not None for h in bm.fingerprint()[-1]] == [b in (3, 2, 5, 1, 0) for b in order]
        assert bm.allocate(2, r0[:12] + list(range(200, 217))) == table  # time 7
        assert (bm.prefix_cache_hits, bm.evictions) == (5, evictions)
        bm.check_invariants()


def test_vllm_v1_shares_only_the_longest_cached_prefix():
    """A cached block after a missing one: uncached-first shares it, vllm-v1 stops at the miss.
    Precomputed keys (a stand-in prompt) make the hole: keys A, B cached; then B is asked after X."""
    for policy, hits in (("uncached-first", 1), ("vllm-v1", 0)):
        bm = BlockManager(8, 2, policy=policy)
        bm.allocate("a", KeyedPrompt(["A", "B"], 5))
        bm.free("a")
        bm.allocate("b", KeyedPrompt(["X", "B"], 5))
        assert bm.prefix_cache_hits == hits
        bm.check_invariants()


def test_uncached_first_looks_a_key_up_when_its_turn_comes():
    """A block taken for an earlier miss may evict a later key of the same prompt: a pool of 2 blocks holds
    A, B cached (B least recently freed); [X, B] evicts B's block for X, then A's for B: no hit."""
    bm = BlockManager(2, 2)
    bm.allocate("a", KeyedPrompt(["A", "B"], 4))
    bm.free("a")
    assert bm.blocks_needed([KeyedPrompt(["X", "B"], 4)]) == 2
    assert bm.allocate("b", KeyedPrompt(["X", "B"], 4)) == [1, 0]
    assert bm.prefix_cache_hits == 0 and bm.evictions == 2
    bm.check_invariants()


# ---- extra keys and precomputed keys ---------------------------------------------------------------------

@pytest.mark.parametrize("policy", ["uncached-first", "vllm-v1"])
def test_extra_keys_separate_adapters_and_salts(policy):
    bm = BlockManager(16, 2, policy=policy)
    prompt = [1, 2, 3, 4, 5]
    bm.allocate("base", prompt)
    bm.allocate("lora-7", prompt, extra_keys=("lora", 7))
    assert bm.prefix_cache_hits == 0  # same tokens, another adapter: nothing shared
    bm.allocate("lora-7 again", prompt, extra_keys=("lora", 7))
    bm.allocate("base again", prompt)
    assert bm.prefix_cache_hits == 4
    assert bm.cached_tokens(prompt, ("salt", "tenant-b")) == 0 and bm.cached_tokens(prompt, ("lora", 7)) == 4
    bm.append_token("lora-7", 6)  # decode blocks carry the extra keys too
    assert bm.cached_tokens(prompt + [6, 0], ("lora", 7)) == 6 and bm.cached_tokens(prompt + [6, 0]) == 4
    with pytest.raises(TypeError, match="extra_keys"):
        bm.allocate("bad", prompt, extra_keys=["lora", 7])
    bm.check_invariants()


class KeyedPrompt(list):
    """Stand-in for a prompt that carries its blocks' keys (a hashed trace): tokens are placeholders."""

    def __init__(self, keys, length):
        super().__init__(range(length))
        self.keys = keys

    def block_keys(self, block_size):
        return self.keys[:len(self) // block_size]


@pytest.mark.parametrize("policy", ["uncached-first", "vllm-v1"])
def test_prompts_bring_their_own_block_keys(policy):
    bm = BlockManager(16, 4, policy=policy)
    bm.allocate("a", KeyedPrompt(["k0", "k1", "k2"], 13))
    assert bm.blocks_needed([KeyedPrompt(["k0", "k1", "zz"], 13)]) == 2  # a new block for zz, a partial one
    bm.allocate("b", KeyedPrompt(["k0", "k1", "zz"], 13))  # same placeholder tokens, other keys
    assert bm.prefix_cache_hits == 2 and bm.block_table("b")[:2] == bm.block_table("a")[:2]
    assert bm.block_table("b")[2] != bm.block_table("a")[2]
    assert bm.cached_tokens(KeyedPrompt(["k0", "k1", "k2"], 13)) == 12
    assert bm.cached_tokens(list(range(13))) == 0  # token-derived keys are other keys
    with pytest.raises(ValueError, match="block_keys"):
        bm.allocate("c", KeyedPrompt(["k0"], 13))
    bm.check_invariants()


def test_policy_is_checked():
    with pytest.raises(ValueError, match="policy must be one of 'uncached-first', 'vllm-v1'"):
        BlockManager(8, 2, policy="lru")
    assert BlockManager(8, 2).policy == "uncached-first"
