"""The block allocator behind a paged KV cache: block tables, reference counts, prefix sharing, copy-on-write.

The cache is a pool of ``num_blocks`` physical blocks of ``block_size`` token slots each (vLLM's
PagedAttention, Kwon et al. 2023, arXiv:2309.06180). A sequence owns a *block table*: the physical
block ids holding its tokens in order, token ``i`` in slot ``i % block_size`` of table entry
``i // block_size``. So a sequence of ``L`` tokens holds ``ceil(L / block_size)`` blocks.

Prefix sharing (vLLM's automatic prefix caching). Every *full* block gets a key that covers its own
tokens and, through the key of the block before it, every token before it:
``key_i = (hash(key_{i-1}), tokens of block i[, extra keys])``. Two sequences share physical block ``i`` only when
their keys agree, so equal blocks after different prefixes never merge, and a partial block is never
shared by key (its content is still changing). The key keeps the block's tokens themselves, so blocks
with different tokens can never collide; only the 64-bit hash of the prefix could. It keeps them in a
compact form that is still one-to-one (:func:`block_content`): a run of consecutive token ids, as every block
of a trace prompt is, is kept as its first id, which makes a trace's keys cheap to build and to hash.

A freed block whose content is still valid (it has a key) is not wiped: it stays findable by a later
request with the same prefix until it is recycled for new content (its key forgotten). A sequence frees
its blocks from the last to the first, so a prefix's tail is evicted before its head. Which free block is
recycled is the *policy* (``BlockManager(policy=...)``):

- ``"uncached-first"`` (the default): freed blocks with a key join an LRU cache of free blocks and are
  recycled only when no never-used or uncached free block is left, least recently freed first. A prompt
  shares every cached block of its chain, even after a missing one, and a block that fills during decode
  switches to an equal cached block when there is one (one block per prefix).
- ``"vllm-v1"``: vLLM v1's automatic prefix caching (docs.vllm.ai, design "Automatic Prefix Caching",
  ``vllm-project/vllm/docs/design/prefix_caching.md``; code ``vllm/v1/core/block_pool.py``: ``BlockPool``, ``touch``,
  ``free_blocks``, ``_maybe_evict_cached_block``; ``vllm/v1/core/kv_cache_utils.py``:
  ``FreeKVCacheBlockQueue``, ``hash_block_tokens``; ``vllm/v1/core/kv_cache_manager.py``:
  ``get_computed_blocks``). One free queue in LRU order holds every free block, cached or not, and
  starts as all blocks in id order; a sequence's freed blocks go to its tail, last block first; a new
  block is the queue's head, and its key, if any, is evicted then. A hit on a free cached block takes it
  out of the queue (``touch``). A prompt shares only its longest cached prefix of full blocks, and at most
  ``(len - 1) // block_size`` of them: vLLM recomputes the last prompt token for its logits, so a prompt
  that ends on a block boundary and is fully cached still fills its last block again. Block tables are
  append-only, so blocks are never deduplicated: that refilled block, or one that fills during decode with
  a prefix already cached elsewhere, is registered as a second block with the same key, and a lookup
  returns the earliest registered of them (``get_cached_block``). Not modelled: vLLM's reserved null
  block (block 0, never allocated: pass one block fewer) and multimodal hashes, which enter only the
  blocks their input overlaps.

Extra keys (``extra_keys`` on :meth:`BlockManager.allocate`): a hashable value that enters the key of every
block of the sequence, prompt and decode alike, as vLLM's ``generate_block_hash_extra_keys`` adds the LoRA
adapter id to every block and the request's ``cache_salt`` to its first block (design doc, "Cache Isolation
for Security"). Every key covers its parent, so salting the first block or every block separates the same
chains: requests with different adapters or salts never share a block, requests with equal ones share as
before.

Precomputed keys. A prompt object with a ``block_keys(block_size)`` method supplies the key of each of its
``len(prompt) // block_size`` full blocks, each already covering its parent, in place of the keys derived from
its tokens, under both policies (:mod:`ringlab.serving.prefix_hits` is checked against this allocator so, on
keys that are a trace's hash ids). Every prompt the scheduler serves, a trace's
:class:`~ringlab.serving.requests.HashedPrompt` included, is keyed from its tokens.

Copy-on-write. :meth:`BlockManager.fork` gives the child the parent's table, every block's reference
count + 1 (parallel sampling, beam search). The first write into a block that another table also
holds copies exactly that block into a fresh one; full shared blocks are never written again, so a
fork copies at most its one partial last block. ``copies`` counts them and ``pending_copies`` lists
the ``(src, dst)`` pairs an engine would copy on the GPU.

Watermark. Admission (:meth:`BlockManager.can_allocate`, :meth:`BlockManager.allocate`) keeps
``watermark_blocks`` free so that running sequences can still grow; growth (:meth:`append_token`,
copy-on-write) may use them.

Sizes: :func:`block_bytes` is KV bytes per token (:func:`ringlab.calc.kvcache.kv_cache_bytes_per_token`)
x ``block_size``; Llama-2-7B in fp16 holds 524,288 B per token, so a 16-token block is 8 MiB and a
60 GiB pool holds 7,680 blocks = 122,880 tokens (card 14).

Models whose layers differ (:class:`CacheLayout`). vLLM's hybrid KV cache manager (docs.vllm.ai, design
"Hybrid KV Cache Manager") gives every group of like layers blocks of one page size from one shared pool:
full-attention layers keep a slot for every token, sliding-window layers only for the recent window, Mamba
layers one state per sequence. Here the block table holds the *primary* layers (those that keep every
token: full attention and MLA), and a pool block is ``block_size`` tokens of them (Gemma-2: its 21 global
layers, vLLM's page). The rest of a sequence's cache, ``calc kv``'s count of its windowed layers and its
Mamba state (:func:`sequence_kv_bytes`), is held as extra blocks of the same pool, rounded up per
sequence (:meth:`BlockManager.hold`). A model whose every KV layer is windowed (Mistral v0.1) has its
windowed layers as primary and a ``window``: its table keeps the newest ``ceil(min(L, window) /
block_size)`` blocks and releases older ones, as vLLM's ``SlidingWindowManager.remove_skipped_blocks``
does.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence

from ringlab.calc.kvcache import kv_cache_bytes, state_bytes_per_sequence
from ringlab.calc.models import ModelConfig, get_model
from ringlab.serving.requests import HashedPrompt, SequenceTokens
from ringlab.validation import positive_int


_MEMO_SIZE = 256  # prompts whose chain keys are remembered (cleared when full)
MAX_BLOCKS = 2**24  # 16.8 M blocks; the books are Python lists, and no GPU pool comes near this


class OutOfBlocksError(RuntimeError):
    """The pool cannot hold a request now (``needed`` > ``available``), or ever (``never`` is True:
    it needs more than the pool less the watermark)."""

    def __init__(self, message: str, needed: int, available: int, never: bool = False):
        super().__init__(message)
        self.needed, self.available, self.never = needed, available, never


class InvariantError(AssertionError):
    """:meth:`BlockManager.check_invariants` found the allocator's books inconsistent."""


class CacheLayout:
    """How one sequence of ``model`` maps onto a pool of equal blocks (see the module docstring).

    Attributes: ``block_size``; ``block_bytes``, bytes of one pool block on one GPU: ``block_size`` tokens of
    the primary layers (every KV layer for a model whose layers are alike, so Llama-2-7B in fp16 keeps its
    8 MiB); ``window``, tokens the primary layers keep (None: every token). Methods give block counts of a
    sequence of ``tokens`` tokens that shares nothing: :meth:`table_blocks`, :meth:`extra_blocks` and their sum
    :meth:`blocks` = ``ceil(sequence_kv_bytes / block_bytes)``.

    Modelled versus vLLM: the windowed layers and the Mamba state of a sequence are rounded up to whole
    blocks together, per sequence, and never shared by prefix (vLLM gives each group its own blocks and can
    share sliding-window blocks); the window is ``calc kv``'s ``ceil(min(L, window) / block_size)`` blocks,
    where vLLM frees a block only once all its tokens are out of the next token's window and may hold one
    more; a prefill is charged what the sequence holds after it (vLLM holds every block of the chunk for
    that one step). Raises ValueError for a model without KV layers (its pool has no block) and, like
    :func:`sequence_kv_bytes`, for linear-attention layers.
    """

    def __init__(self, model: str | ModelConfig, block_size: int = 16, dtype: str = "fp16", tp: int = 1):
        model = get_model(model)
        self.block_size = bs = positive_int(block_size, "block_size")
        self._model, self._dtype, self._tp = model, dtype, tp
        bounded = [layer.window for layer in model.layers if layer.caches_kv and layer.window is not None
                   and layer.held_tokens(layer.window + 1) == layer.window]
        self._bounded = max(bounded, default=0)  # past this length only the primary layers grow

        def kv(tokens):
            return kv_cache_bytes(model, tokens, 1, dtype, tp) if tokens else 0

        b = self._bounded
        growth = kv(b + 1) - kv(b)  # bytes per token of the layers that keep every token
        if growth:
            self.window = None
        elif b:  # every KV layer is windowed: the widest window's layers are the primary ones
            self.window, growth = b, kv(b) - kv(b - 1)
        else:
            raise ValueError(f"{model.name} has no layer that caches KV: a paged pool has no block for it")
        self.block_bytes = growth * bs
        self._state = state_bytes_per_sequence(model, dtype, tp)
        self._extra: dict[int, int] = {}
        self.has_extra = bool(self._state) or any(
            layer.caches_kv and layer.window is not None and layer.window != self.window for layer in model.layers)

    def table_blocks(self, tokens: int) -> int:
        """Blocks of the primary layers: ``ceil(tokens / block_size)``, or of the window's last tokens."""
        held = tokens if self.window is None else min(tokens, self.window)
        return -(-held // self.block_size)

    def extra_blocks(self, tokens: int) -> int:
        """Blocks a sequence of ``tokens`` tokens (int >= 1) holds beyond its table: its other windowed layers
        and its Mamba state, in whole blocks. Constant once ``tokens`` passes every window (memoised)."""
        if not self.has_extra:
            return 0
        key = min(tokens, self._bounded) if self._bounded else 1
        out = self._extra.get(key)
        if out is None:
            out = self._extra[key] = self.blocks(key) - self.table_blocks(key)
        return out

    def blocks(self, tokens: int) -> int:
        """All blocks one sequence of ``tokens`` tokens holds when it shares nothing (int):
        ``ceil(sequence_kv_bytes(tokens) / block_bytes)``."""
        size = sequence_kv_bytes(self._model, tokens, self.block_size, self._dtype, self._tp)
        return -(-size // self.block_bytes)


def cache_layout(model: str | ModelConfig, block_size: int = 16, dtype: str = "fp16", tp: int = 1) -> CacheLayout:
    """The :class:`CacheLayout` of ``model`` in blocks of ``block_size`` tokens of ``dtype`` on each of ``tp`` GPUs."""
    return CacheLayout(model, block_size, dtype, tp)


def block_bytes(model: str | ModelConfig, block_size: int = 16, dtype: str = "fp16", tp: int = 1) -> int:
    """Bytes of one KV block of the pool on one GPU (int): ``block_size`` tokens of the layers that keep every
    token (:class:`CacheLayout`), i.e. ``kv_cache_bytes_per_token(model, dtype, tp) x block_size`` for a
    model whose layers are alike. Gemma-2-9B (21 global of 42 layers) in bf16: 16 x 21 x 8,192 = 2,752,512 B.

    Every such layer has its own block for the same token positions, so a block of the pool stands for
    ``block_size`` tokens in all of them. Raises ValueError/TypeError like the calculator.
    """
    return cache_layout(model, block_size, dtype, tp).block_bytes


def sequence_kv_bytes(model: str | ModelConfig, tokens: int, block_size: int = 16, dtype: str = "fp16",
                      tp: int = 1) -> int:
    """Bytes one sequence of ``tokens`` tokens holds on one GPU in a paged cache (int): ``calc kv``'s count,
    layer by layer, in whole blocks (:func:`ringlab.calc.kvcache.kv_cache_bytes` with ``block_size``:
    windowed layers keep at most their window, MLA its latent, state-space layers nothing) plus the fixed
    state of its Mamba layers (:func:`ringlab.calc.kvcache.state_bytes_per_sequence`).
    Llama-2-7B, 512 tokens, bf16: 32 blocks x 8 MiB = 268,435,456 B. Raises ValueError like the calculators.
    """
    return kv_cache_bytes(model, tokens, 1, dtype, tp, block_size) + state_bytes_per_sequence(model, dtype, tp)


def pool_blocks(pool_bytes: int, model: str | ModelConfig, block_size: int = 16, dtype: str = "fp16",
                tp: int = 1) -> int:
    """Whole blocks that fit in ``pool_bytes`` of KV memory (int): ``pool_bytes // block_bytes(...)``.

    Llama-2-7B, fp16, 16-token blocks, 60 GiB: 64,424,509,440 // 8,388,608 = 7,680 blocks.
    Raises ValueError for a non-positive ``pool_bytes``.
    """
    return positive_int(pool_bytes, "pool_bytes") // block_bytes(model, block_size, dtype, tp)


POLICIES = ("uncached-first", "vllm-v1")  # which free block is recycled (module docstring)


def block_content(tokens: tuple):
    """A full block's tokens in the one form its key holds (int or tuple): the first token when the tuple
    ``tokens`` holds consecutive integers (every block of a trace prompt,
    :class:`~ringlab.serving.requests.HashedPrompt`), else ``tokens`` itself. One-to-one, since an int never
    equals a tuple; and a key holding an int hashes at once, where one holding 16 tokens hashes all of them on
    every dict operation. Tokens that are not integers are returned as they are; nothing is raised."""
    first = tokens[0]
    try:
        if tokens[-1] - first == len(tokens) - 1 and tokens == tuple(range(first, first + len(tokens))):
            return first
    except TypeError:  # tokens that are not integers
        pass
    return tokens


def block_contents(prompt: Sequence, block_size: int) -> list:
    """:func:`block_content` of each full block of ``block_size`` tokens of ``prompt`` (a sequence of token ids),
    in order: ``len(prompt) // block_size`` ints or tuples. A HashedPrompt whose hash block holds whole blocks
    gives those within its hashed tokens from its hash ids, without listing them (every such block is
    consecutive ints); the blocks that reach into its tail come from its tokens."""
    full = len(prompt) // block_size
    if isinstance(prompt, HashedPrompt) and prompt.hash_block % block_size == 0:
        hash_block, offsets = prompt.hash_block, range(0, prompt.hash_block, block_size)
        hashed = min(full, prompt.hashed_length // block_size)
        return [h * hash_block + o for h in prompt.hash_ids for o in offsets][:hashed] + [
            block_content(prompt[i:i + block_size]) for i in range(hashed * block_size, full * block_size, block_size)]
    whole = prompt if type(prompt) is tuple else tuple(prompt)
    return [block_content(whole[i:i + block_size]) for i in range(0, full * block_size, block_size)]


def _chain(head, content, extra=None) -> tuple:
    """Key of a full block: ``head``, its parent's key's hash (None for the first block), ``content``, its own
    tokens (:func:`block_content`), and the sequence's extra keys when it has any (vLLM's
    ``hash_block_tokens(parent_hash, tokens, extra_keys)``)."""
    return (head, content) if extra is None else (head, content, extra)


class FreeQueue:
    """Free blocks in LRU order, oldest first, with removal from the middle: vLLM v1's
    ``FreeKVCacheBlockQueue`` (``vllm/v1/core/kv_cache_utils.py``, a doubly linked list there), here a deque of
    block ids whose removals are lazy. :meth:`remove` leaves the block's entry in place and counts it stale;
    :meth:`pop_many` skips stale entries as they reach the front. A block's one live entry is always its last
    (it was appended after every removal), so its stale count says how many of its entries to skip. When stale
    entries outnumber live ones by far, the deque is rebuilt, so its length stays within a constant of ``len``.

    ``num_blocks``: the pool's size (block ids are ``0 .. num_blocks - 1``); ``blocks``: the first entries.
    Each operation is O(1) amortised (``pop_many``: per block); iteration lists the live blocks, oldest first.
    Callers keep the rules: append only blocks not in the queue, remove only blocks in it.
    """

    __slots__ = ("_items", "_stale", "_live")

    def __init__(self, num_blocks: int, blocks=()):
        self._items: deque[int] = deque(blocks)
        self._stale = [0] * num_blocks  # entries of each block to skip
        self._live = len(self._items)

    def __len__(self) -> int:
        return self._live

    def __iter__(self):
        skip = list(self._stale)
        for block in self._items:
            if skip[block]:
                skip[block] -= 1
            else:
                yield block

    def extend(self, blocks: list[int]) -> None:
        """Append ``blocks`` (newest last)."""
        self._items.extend(blocks)
        self._live += len(blocks)

    def remove(self, block: int) -> None:
        """Take ``block`` out (it must be in the queue)."""
        self._stale[block] += 1
        self._live -= 1
        if len(self._items) > 4 * self._live + 1024:
            self._items = deque(self)
            self._stale = [0] * len(self._stale)

    def pop_many(self, count: int) -> list[int]:
        """The ``count`` oldest blocks, taken out, oldest first (``count`` <= ``len``)."""
        items, stale, out = self._items, self._stale, []
        while len(out) < count:
            block = items.popleft()
            if stale[block]:
                stale[block] -= 1
            else:
                out.append(block)
        self._live -= count
        return out


class BlockManager:
    """Paged KV-cache blocks for many sequences (see the module docstring for the model).

    Args:
        num_blocks: physical blocks in the pool (int >= 1).
        block_size: token slots per block (int >= 1; vLLM's default is 16).
        watermark_blocks: blocks admission leaves free for running sequences to grow (int >= 0,
            less than ``num_blocks``).
        enable_prefix_caching: share full blocks by chained key and keep freed ones cached (default True).
        window: tokens each table keeps (None, the default: all). With a window a table keeps its newest
            ``ceil(min(L, window) / block_size)`` blocks; older entries are None and their blocks are released
            (vLLM's ``SlidingWindowManager``). Prefix caching is not modelled with a window.
        policy: which free block is recycled and how prompts hit, one of :data:`POLICIES`:
            ``"uncached-first"`` (default) or ``"vllm-v1"`` (vLLM v1's exactly; module docstring).

    A sequence may also hold extra blocks outside its table (:meth:`hold`: the layers the table does not
    cover, such as Mamba state); they are released with it.
    Sequence ids are any hashable values; token ids any hashable values (ints in practice).
    Errors: ValueError for bad sizes (``num_blocks`` at most :data:`MAX_BLOCKS`), an unknown policy, unknown or
    duplicate sequence ids and empty prompts;
    :class:`OutOfBlocksError` when the pool cannot hold what is asked (the books are left unchanged).
    """

    def __init__(self, num_blocks: int, block_size: int = 16, watermark_blocks: int = 0,
                 enable_prefix_caching: bool = True, window: int | None = None, policy: str = "uncached-first"):
        self.num_blocks = positive_int(num_blocks, "num_blocks")
        if self.num_blocks > MAX_BLOCKS:
            raise ValueError(f"num_blocks={self.num_blocks:,} is above {MAX_BLOCKS:,}: larger than any GPU's pool "
                             "(check the units)")
        self.block_size = positive_int(block_size, "block_size")
        if isinstance(watermark_blocks, bool) or not isinstance(watermark_blocks, int) \
                or not 0 <= watermark_blocks < self.num_blocks:
            raise ValueError(f"watermark_blocks must be an int in [0, num_blocks={self.num_blocks}), "
                             f"got {watermark_blocks!r}")
        if not isinstance(enable_prefix_caching, bool):
            raise TypeError(f"enable_prefix_caching must be a bool, got {enable_prefix_caching!r}")
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(map(repr, POLICIES))}, got {policy!r}")
        self.policy = policy
        self._v1 = policy == "vllm-v1"
        self.watermark_blocks = watermark_blocks
        self.enable_prefix_caching = enable_prefix_caching
        self.window = None if window is None else positive_int(window, "window")
        if self.window is not None and enable_prefix_caching:
            raise ValueError("a window with prefix caching is not modelled: pass enable_prefix_caching=False")
        self._extra: dict[Hashable, list[int]] = {}  # blocks a sequence holds outside its table (hold())
        self._ref = [0] * self.num_blocks
        self._key: list[tuple | None] = [None] * self.num_blocks  # key of a full, registered block
        # uncached-first: free blocks without a key in _free, those with one in _lru (the LRU cache).
        # vllm-v1: every free block in _lru, cached or not; _free stays empty.
        self._free: deque[int] = deque() if self._v1 else deque(range(self.num_blocks))
        self._lru = FreeQueue(self.num_blocks, range(self.num_blocks) if self._v1 else ())
        self._cached: dict[tuple, int] = {}  # every registered key -> its earliest registered block
        self._twins: dict[tuple, list[int]] = {}  # vllm-v1: later blocks registered with the same key, in order
        self._tables: dict[Hashable, list[int | None]] = {}  # None: released, out of the window
        self._tokens: dict[Hashable, SequenceTokens] = {}  # the prompt as given, then the tokens appended
        self._keys: dict[Hashable, list[tuple]] = {}  # chain keys of each sequence's full blocks
        self._salt: dict[Hashable, Hashable] = {}  # each sequence's extra keys (None: none)
        self.prefix_cache_hits = 0  # blocks found by key instead of filled again
        self.copies = 0  # copy-on-write copies made
        self.evictions = 0  # cached blocks recycled for new content
        self.pending_copies: list[tuple[int, int]] = []  # (src, dst) copies not yet taken by the engine
        self._memo: dict[tuple, tuple[list, bool]] = {}  # (prompt, extra keys) -> its chain keys, all different

    # ---- reading the books -------------------------------------------------------------------
    @property
    def num_free_blocks(self) -> int:
        """Blocks allocatable now: never-used or uncached free blocks plus cached free ones."""
        return len(self._free) + len(self._lru)

    @property
    def num_cached_free_blocks(self) -> int:
        """Free blocks that still hold a valid prefix and can be found by key (vllm-v1: O(free blocks))."""
        return sum(self._key[b] is not None for b in self._lru) if self._v1 else len(self._lru)

    @property
    def num_used_blocks(self) -> int:
        """Blocks held by at least one block table."""
        return self.num_blocks - self.num_free_blocks

    def block_table(self, seq_id) -> list[int]:
        """Physical block ids of ``seq_id`` in token order (a copy; None for blocks released past the window).
        ValueError for an unknown id."""
        return list(self._table(seq_id))

    def held_blocks(self, seq_id) -> list[int]:
        """Physical blocks ``seq_id`` holds: its table's (without released entries), then its extra ones."""
        return [b for b in self._table(seq_id) if b is not None] + self._extra[seq_id]

    def tokens(self, seq_id) -> list:
        """Token ids held for ``seq_id`` (a copy)."""
        self._table(seq_id)
        return list(self._tokens[seq_id])

    def cached_block_ids(self) -> list[int]:
        """Ids of the blocks that carry a key, held or free (findable by a later prompt), ascending."""
        return [block for block, key in enumerate(self._key) if key is not None]

    def ref_count(self, block: int) -> int:
        """How many block tables hold physical ``block``."""
        return self._ref[block]

    def sequences(self) -> list:
        """Ids of the sequences that hold blocks, in allocation order."""
        return list(self._tables)

    def blocks_needed(self, token_lists: Sequence[Sequence], extra_keys: Sequence | None = None) -> int:
        """Free blocks that allocating each token list in turn (as new sequences) would take.

        Counts full blocks found by key (held ones cost nothing, cached free ones one each, since they
        leave the free pool) and, within the batch, blocks an earlier list of it would register.
        ``extra_keys``: None, or one extra key (or None) per list, as :meth:`allocate` takes them.
        """
        if extra_keys is None:
            extra_keys = [None] * len(token_lists)
        elif len(extra_keys) != len(token_lists):
            raise ValueError(f"extra_keys must give one value per token list ({len(token_lists)}), "
                             f"got {len(extra_keys)}")
        # cached keys whose free block the batch already took; keys the batch itself would register
        batch = (set(), set()) if len(token_lists) > 1 else None
        return sum(self._look_up(tokens, *self._prompt_keys(tokens, extra), batch)[2]
                   for tokens, extra in zip(token_lists, extra_keys))

    def _look_up(self, tokens: Sequence, keys: list, partial: int, distinct: bool,
                 batch: tuple[set, set] | None = None) -> tuple[list, list[bool], int, list | None]:
        """One prompt, given its chain ``keys``, ``partial`` block and whether the keys are all ``distinct``
        (:meth:`_prompt_keys`): its full blocks' keys within the window (a new list), which of them it would
        share (module docstring, per policy), the free blocks it would take (:meth:`blocks_needed`), and the blocks
        found (below).

        ``batch``: None for a prompt alone, else the sets ``(drawn, added)`` of the batch so far, updated here:
        cached free keys it already took (not counted again) and keys it registers (counted as cached).
        Fourth: the cached block of each key (None: a miss) when the bulk count ran, else None
        (:meth:`_fill_in_bulk` reuses it)."""
        keys = keys[self._skipped(len(tokens)):]
        if not self.enable_prefix_caching:
            return keys, [False] * len(keys), partial + len(keys), None
        cached, ref = self._cached, self._ref
        cap = (len(tokens) - 1) // self.block_size if self._v1 else len(keys)  # vllm-v1 recomputes the last token
        found = list(map(cached.get, keys))
        drawn, added = batch if batch is not None else (set(), set())
        if distinct:  # in bulk: no key of this prompt comes twice, so the batch's sets are read, then updated
            hits = [block is not None or key in added for key, block in zip(keys, found)] if added else \
                [block is not None for block in found]
            if batch is not None:  # keys it registers: cached nowhere, the batch's included
                added.update(key for key, block, hit in zip(keys, found, hits) if not hit)
            if self._v1:  # only the longest cached prefix
                n = min(cap, hits.index(False) if False in hits else len(hits))
                hits[n:] = [False] * (len(hits) - n)
                found[n:] = [None] * (len(found) - n)
            # cached free blocks it takes out of the free pool, unless the batch already took them
            taken = [key for key, block, hit in zip(keys, found, hits)
                     if hit and block is not None and not ref[block] and key not in drawn]
            drawn.update(taken)
            return keys, hits, partial + hits.count(False) + len(taken), found
        hits = [block is not None or key in added for key, block in zip(keys, found)]
        if self._v1:
            n = min(cap, hits.index(False) if False in hits else len(hits))
            hits = [True] * n + [False] * (len(hits) - n)
        need = partial + hits.count(False)
        for key, block, hit in zip(keys, found, hits):
            if not hit:
                if block is None:
                    added.add(key)
            elif block is not None and ref[block] == 0 and key not in drawn:
                need += 1  # it leaves the cache of free blocks
                drawn.add(key)
        return keys, hits, need, None

    def cached_tokens(self, token_ids: Sequence, extra_keys=None) -> int:
        """Leading tokens of ``token_ids`` whose full blocks are cached by key (a multiple of block_size);
        under ``vllm-v1`` at most ``(len - 1) // block_size`` blocks (the last token is always computed).
        ``extra_keys`` as in :meth:`allocate`."""
        _, hits, _, _ = self._look_up(token_ids, *self._prompt_keys(token_ids, extra_keys))
        return (hits.index(False) if False in hits else len(hits)) * self.block_size

    @property
    def admission_room(self) -> int:
        """Blocks new sequences may take now: the free blocks less the watermark (may be negative)."""
        return self.num_free_blocks - self.watermark_blocks

    @property
    def usable_blocks(self) -> int:
        """The most blocks new sequences can ever take: the whole pool less the watermark."""
        return self.num_blocks - self.watermark_blocks

    def never_fits(self, need: int) -> bool:
        """Whether new sequences needing ``need`` blocks exceed :attr:`usable_blocks`: no amount of freeing
        admits them (the one rule for "never fits", here and in the scheduler)."""
        return need > self.usable_blocks

    def can_allocate(self, *token_lists: Sequence, extra_keys: Sequence | None = None) -> bool:
        """Whether :meth:`allocate` of each token list (new sequences, in order) fits while leaving
        ``watermark_blocks`` free (``extra_keys`` as in :meth:`blocks_needed`)."""
        return self.blocks_needed(token_lists, extra_keys) <= self.admission_room

    # ---- changing the books ------------------------------------------------------------------
    def allocate(self, seq_id, token_ids: Sequence, extra_keys: Hashable = None) -> list[int]:
        """Give new sequence ``seq_id`` blocks for its prompt ``token_ids`` (non-empty); return its table.

        Full blocks whose chain key is cached are shared (``prefix_cache_hits`` += 1 each); the rest are
        fresh. Under ``uncached-first`` every cached block of the chain is shared, even after a missing one
        (its key covers the whole prefix); under ``vllm-v1`` only the longest cached prefix, capped at
        ``(len - 1) // block_size`` blocks (module docstring). ``token_ids`` may be a sequence with a
        ``block_keys(block_size)`` method (precomputed keys, module docstring). ``extra_keys``: a hashable value
        entering every block's key (LoRA adapter id, cache salt), None for none.
        Raises ValueError for a known ``seq_id``, an empty prompt, or ``block_keys`` giving a wrong number of
        keys; TypeError for unhashable ``extra_keys``; :class:`OutOfBlocksError` if the blocks needed exceed
        the free blocks less the watermark.
        """
        if seq_id in self._tables:
            raise ValueError(f"sequence {seq_id!r} already holds blocks; free it first")
        # the prompt is kept as given when it cannot change (a tuple, a HashedPrompt: not listed token by token)
        prompt = token_ids if type(token_ids) is tuple or isinstance(token_ids, HashedPrompt) else tuple(token_ids)
        if not len(prompt):
            raise ValueError(f"token_ids of sequence {seq_id!r} must not be empty")
        all_keys, partial, distinct = self._prompt_keys(token_ids, extra_keys)
        keys, hits, need, found = self._look_up(token_ids, all_keys, partial, distinct)
        room = self.admission_room
        if need > room:
            never = self.never_fits(need)
            raise OutOfBlocksError(
                f"sequence {seq_id!r} needs {need} blocks for {len(prompt)} tokens; {room} of {self.num_blocks} "
                f"are free above the watermark of {self.watermark_blocks}"
                + (" (it can never fit this pool)" if never else ""), need, room, never)
        table: list[int | None] = [None] * (len(all_keys) - len(keys))  # released past the window
        if not (distinct and not self._v1 and self._fill_in_bulk(table, keys, partial, found)):
            self._fill(table, keys, hits, partial)
        self._tables[seq_id], self._tokens[seq_id], self._keys[seq_id] = table, SequenceTokens(prompt), list(all_keys)
        self._extra[seq_id], self._salt[seq_id] = [], extra_keys
        return list(table)

    def _fill(self, table: list, keys: list, hits: list[bool], partial: int) -> None:
        """Append a new sequence's blocks to ``table``, one key at a time: its full blocks' ``keys`` (``hits``:
        which :meth:`_look_up` found shared), then a fresh block for its ``partial`` one. vllm-v1's hits are a
        prefix, all touched before any new block is taken, as in vLLM; uncached-first looks each key up when it
        comes to it (a block taken for an earlier one may have evicted it)."""
        cached, ref, v1 = self._cached, self._ref, self._v1
        take, register, unfree = self._take, self._register, self._unfree
        shared = 0
        for key, hit in zip(keys, hits):
            block = cached.get(key) if hit or not v1 else None
            if block is None:
                block = take()
                register(block, key)
            else:
                if not ref[block]:
                    unfree(block)
                ref[block] += 1
                shared += 1
            table.append(block)
        self.prefix_cache_hits += shared
        if partial:
            table.append(take())

    def _fill_in_bulk(self, table: list, keys: list, partial: int, found: list | None = None) -> bool:
        """:meth:`_fill` under uncached-first for ``keys`` that are all different, with a few list operations
        instead of a few calls per block, when its hits all come before its first miss (False, nothing done,
        otherwise: the caller fills one key at a time). Then no block taken for a miss can evict a hit still to
        come, so the hits can be touched first and the blocks for the misses taken together, in the same order.
        Under uncached-first that is every prompt: a cached key's parent is cached too (a table holds its whole
        chain, frees it tail first, and so files a parent after its children in the LRU order). ``found``: each
        key's cached block or None, as :meth:`_look_up` found them with the books unchanged since (None: look
        them up)."""
        cached, ref = self._cached, self._ref
        if found is None:
            found = list(map(cached.get, keys))
        first_miss = found.index(None) if None in found else len(found)
        if found.count(None) != len(found) - first_miss:
            return False
        hits, misses = found[:first_miss], keys[first_miss:]
        lru = self._lru
        for block in hits:
            if not ref[block]:
                lru.remove(block)  # a hit on a cached free block (vLLM's touch)
            ref[block] += 1
        self.prefix_cache_hits += len(hits)
        new = self._take_many(len(misses) + partial)
        if self.enable_prefix_caching:  # keys all different and none cached: each registers its block
            key_of = self._key
            for key, block in zip(misses, new):
                cached[key] = block
                key_of[block] = key
        table += hits
        table += new
        return True

    def append_token(self, seq_id, token_id) -> tuple[int, int] | None:
        """Add one token to ``seq_id``: a fresh block when the last one is full, a copy of the last block
        when another table shares it (copy-on-write). Returns the ``(src, dst)`` copy made, else None.

        When the token fills its block, the block gets its chain key (with the sequence's extra keys) and
        becomes shareable; if that key is already cached in another block (the same prefix decoded twice),
        ``uncached-first`` switches the table to that block and frees this one, so equal prefixes never hold
        two blocks, while ``vllm-v1`` keeps its append-only table and registers this block as a second one.
        Raises ValueError for an unknown id, TypeError for an unhashable ``token_id`` (a block's key holds
        its tokens), :class:`OutOfBlocksError` when a block is needed and none is free (the watermark does
        not apply: it exists for this growth). On every error the books are left unchanged.
        """
        table, tokens = self._table(seq_id), self._tokens[seq_id]
        length = len(tokens)
        try:
            hash(token_id)
        except TypeError:
            raise TypeError(f"token_id must be hashable (an int in practice), got {type(token_id).__name__} "
                            f"{token_id!r:.60}") from None
        copy = None
        if length % self.block_size == 0:
            released = self._skipped(length + 1) - self._skipped(length)
            oldest = table[len(table) - self._kept(length)] if released else None
            if oldest is not None and self._ref[oldest] == 1:  # its slot past the window frees a block
                self._release(table, len(table) - self._kept(length))
                table.append(self._take())
            else:
                table.append(self._take_for(seq_id, "a new block"))
                if released:
                    self._release(table, len(table) - 1 - self._kept(length))
        elif self._ref[table[-1]] > 1:
            src = table[-1]
            dst = self._take_for(seq_id, "a copy of its shared last block")
            self._ref[src] -= 1
            table[-1] = dst
            copy = (src, dst)
            self.copies += 1
            self.pending_copies.append(copy)
        tokens.append(token_id)
        bs = self.block_size
        if (length + 1) % bs == 0:
            keys = self._keys[seq_id]
            last = block_content(tuple(tokens[length + 1 - bs:]))
            key = _chain(hash(keys[-1]) if keys else None, last, self._salt[seq_id])
            keys.append(key)
            twin = self._cached.get(key) if self.enable_prefix_caching and not self._v1 else None
            if twin is None:
                self._register(table[-1], key)
            else:  # the same prefix is already cached in another block: use that one, free this one
                if self._ref[twin] == 0:
                    self._unfree(twin)
                self._ref[twin] += 1
                self._ref[table[-1]] -= 1
                if self._ref[table[-1]] == 0:
                    self._to_free([table[-1]])
                table[-1] = twin
        return copy

    def extend_within_block(self, seq_id, token_ids: Sequence) -> None:
        """Append ``token_ids`` to ``seq_id`` when :meth:`append_token` one by one would do nothing else: they
        neither start a block, nor fill one, nor write into a block another table shares (a scheduler's bulk
        decode path: its other tokens go through :meth:`append_token`). Raises ValueError for an unknown id
        or for tokens that would do any of those (the books are left unchanged)."""
        table, tokens = self._table(seq_id), self._tokens[seq_id]
        length = len(tokens)
        used = length % self.block_size
        if token_ids and (not used or used + len(token_ids) >= self.block_size or self._ref[table[-1]] != 1):
            raise ValueError(f"{len(token_ids)} tokens after {length} of sequence {seq_id!r} start, fill or "
                             "share a block: append them with append_token")
        tokens.extend(token_ids)

    def fork(self, parent_id, child_id) -> list[int]:
        """Make ``child_id`` a copy of ``parent_id`` sharing every block (ref counts + 1); return its table.

        No block is taken now: the first write into a shared partial block copies it; the child holds no
        extra blocks (:meth:`hold`). Raises ValueError for an unknown parent or a known child id.
        """
        table = self._table(parent_id)
        if child_id in self._tables:
            raise ValueError(f"sequence {child_id!r} already holds blocks; free it first")
        for block in table:
            if block is not None:
                self._ref[block] += 1
        self._tables[child_id] = list(table)
        self._extra[child_id] = []
        self._tokens[child_id] = self._tokens[parent_id].copy()
        self._keys[child_id] = list(self._keys[parent_id])
        self._salt[child_id] = self._salt[parent_id]
        return list(table)

    def free(self, seq_id) -> None:
        """Release ``seq_id``'s blocks, its extra ones and then its table's last first: a block no table holds
        any more joins the LRU cache when it has a key, the plain free list otherwise (``vllm-v1``: the free
        queue's tail either way, keeping its key). Raises ValueError for an unknown id."""
        table = self._table(seq_id)
        self._put_back(self._extra.pop(seq_id))
        ref, released = self._ref, []
        for block in reversed(table):
            if block is not None:
                ref[block] -= 1
                if not ref[block]:
                    released.append(block)
        self._to_free(released)
        del self._tables[seq_id], self._tokens[seq_id], self._keys[seq_id], self._salt[seq_id]

    def hold(self, seq_id, count: int) -> None:
        """Make ``seq_id`` hold exactly ``count`` (int >= 0) extra blocks outside its table, taking free blocks
        or returning its own (the layers its table does not cover: windowed layers of another group, Mamba
        state). The watermark does not apply (admission checks it). Raises ValueError for an unknown id or a
        bad count, :class:`OutOfBlocksError` (books unchanged) when too few blocks are free."""
        held = self._extra.get(seq_id)
        if held is not None and type(count) is int and count == len(held):
            return  # the common case, once per decode step: nothing to change
        self._table(seq_id)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"count must be an int >= 0, got {count!r}")
        extra = self._extra[seq_id]
        more = count - len(extra)
        if more > self.num_free_blocks:
            raise OutOfBlocksError(f"sequence {seq_id!r} needs {more} more blocks outside its table and "
                                   f"{self.num_free_blocks} of {self.num_blocks} are free", more, self.num_free_blocks)
        if more < 0:
            self._put_back([extra.pop() for _ in range(-more)])
        extra.extend(self._take() for _ in range(max(more, 0)))

    def take_pending_copies(self) -> list[tuple[int, int]]:
        """The copy-on-write ``(src, dst)`` pairs made since the last call (the engine's copy list)."""
        out, self.pending_copies = self.pending_copies, []
        return out

    # ---- checking ----------------------------------------------------------------------------
    def check_invariants(self) -> None:
        """Raise :class:`InvariantError` naming the first broken rule; return None when all hold.

        Rules: every block is exactly one of free, cached-free, or held; a block's ref count equals the
        number of tables (and extra holdings) holding it; no block is both free and referenced; each table has
        ``ceil(tokens / block_size)`` entries, of which the newest ``ceil(min(tokens, window) / block_size)``
        hold a block and the older are released (None); extra blocks carry no key; each key maps to blocks
        carrying that key and every block carrying a key is mapped; every full block held carries its
        sequence's chain key, and under ``uncached-first`` is the cached one for its prefix (no prefix held
        twice; only ``vllm-v1`` registers twins); with no sequence left, every block is free (nothing leaked).
        """
        def fail(msg):
            raise InvariantError(msg)

        free, cached = list(self._free), []
        for block in self._lru:  # (vllm-v1's one queue holds both kinds)
            (free if self._key[block] is None else cached).append(block)
        if self._v1 and self._free:
            fail("vllm-v1 keeps a free block outside its one queue")
        if len(set(free)) != len(free) or set(free) & set(cached):
            fail("a block is listed twice among the free blocks")
        holders = [0] * self.num_blocks
        for seq_id, table in self._tables.items():
            length = len(self._tokens[seq_id])
            expected = -(-length // self.block_size)
            if len(table) != expected:
                fail(f"sequence {seq_id!r} holds {len(table)} blocks for {length} tokens, expected {expected}")
            skip = self._skipped(length)
            if any(b is not None for b in table[:skip]) or any(b is None for b in table[skip:]):
                fail(f"sequence {seq_id!r} should hold its newest {expected - skip} blocks and release the "
                     f"{skip} before them")
            for block in self._extra[seq_id]:
                holders[block] += 1
                if self._key[block] is not None:
                    fail(f"sequence {seq_id!r} holds extra block {block}, which carries a key")
            if len(self._keys[seq_id]) != length // self.block_size:
                fail(f"sequence {seq_id!r} has {len(self._keys[seq_id])} chain keys for its full blocks")
            for block in table:
                if block is not None:
                    holders[block] += 1
        for block in range(self.num_blocks):
            if holders[block] != self._ref[block]:
                fail(f"block {block} has ref count {self._ref[block]} but {holders[block]} tables hold it")
        for block in free + cached:
            if self._ref[block]:
                fail(f"block {block} is free and referenced (ref count {self._ref[block]})")
        if len(free) + len(cached) + sum(1 for r in self._ref if r) != self.num_blocks:
            fail("free, cached and held blocks do not add up to the pool")
        if self._twins and not self._v1:
            fail("uncached-first registered two blocks under one key")
        cached_free = set(cached)
        mapped = list(self._cached.items())
        mapped += [(key, block) for key, twins in self._twins.items() for block in twins]
        for key, block in mapped:
            if self._key[block] != key:
                fail(f"the cache maps a key to block {block}, which carries another")
            if self._ref[block] == 0 and block not in cached_free:
                fail(f"block {block} has a key, no holder, and is not in the cache of free blocks")
        if len(mapped) != sum(key is not None for key in self._key):
            fail("a block carries a key that the cache does not map to it")
        for seq_id, table in self._tables.items():
            for key, block in zip(self._keys[seq_id], table):
                if not self.enable_prefix_caching:  # (no window with caching: no None here)
                    continue
                if self._key[block] != key:
                    fail(f"sequence {seq_id!r} holds a full block {block} that does not carry its chain key")
                if not self._v1 and self._cached.get(key) != block:
                    fail(f"sequence {seq_id!r} holds a full block {block} that is not the cached one for its "
                         "prefix: one prefix, two blocks")
        for block in free:
            if self._key[block] is not None:
                fail(f"block {block} is on the plain free list but still carries a key")
        if not self._tables and self.num_free_blocks != self.num_blocks:
            fail(f"no sequence is left but {self.num_used_blocks} blocks are not free (a leak)")

    def fingerprint(self) -> tuple:
        """What the allocator's future decisions depend on, without block ids: the count of plain free blocks,
        then the LRU order of cached free blocks (``vllm-v1``: of its one free queue) as key hashes (None: no
        key) (a scheduler uses it to recognise a state it has been in before)."""
        return len(self._free), tuple(None if self._key[b] is None else hash(self._key[b]) for b in self._lru)

    # ---- internals ---------------------------------------------------------------------------
    def _table(self, seq_id) -> list[int]:
        try:
            return self._tables[seq_id]
        except KeyError:
            raise ValueError(f"unknown sequence {seq_id!r}: it holds no blocks") from None

    def _prompt_keys(self, prompt: Sequence, extra=None) -> tuple[list, int, bool]:
        """Chain keys of the full blocks of ``prompt`` (a list the caller must not change), whether a partial
        block is left (0 or 1), and whether the keys are all different (they are unless two hashes collide).

        From ``prompt.block_keys(block_size)`` when the prompt has that method, else from its blocks' tokens
        (:func:`block_contents`; memoised: a scheduler asks again about the same waiting prompt every step).
        """
        try:
            hash(extra)
        except TypeError:
            raise TypeError(f"extra_keys must be hashable (an int or a tuple), got {type(extra).__name__} "
                            f"{extra!r:.60}") from None
        bs = self.block_size
        partial = int(len(prompt) % bs != 0)
        block_keys = getattr(prompt, "block_keys", None)
        if block_keys is not None:
            keys = list(block_keys(bs))
            if len(keys) != len(prompt) // bs:
                raise ValueError(f"prompt.block_keys({bs}) gave {len(keys)} keys for {len(prompt)} tokens; "
                                 f"expected one per full block, {len(prompt) // bs}")
            keys = keys if extra is None else [(key, extra) for key in keys]
            return keys, partial, len(set(keys)) == len(keys)
        try:  # a hashable prompt (a tuple, a HashedPrompt) is its own memo key, without listing its tokens
            memo = (prompt, extra)
            found = self._memo.get(memo)
        except TypeError:  # a list
            memo = (tuple(prompt), extra)
            found = self._memo.get(memo)
        if found is None:
            keys, heads, head = [], [], None
            add_key, add_head = keys.append, heads.append  # (the loop runs once per block of a trace)
            for content in block_contents(memo[0], bs):
                key = _chain(head, content, extra)
                head = hash(key)
                add_key(key)
                add_head(head)
            # each key holds its parent's hash, and the first no hash: two keys are equal only if two hashes are
            found = keys, len(set(heads)) == len(heads)
            if len(self._memo) >= _MEMO_SIZE:
                self._memo.clear()
            self._memo[memo] = found
        return found[0], partial, found[1]

    def _kept(self, tokens: int) -> int:
        """Table entries holding a block for a sequence of ``tokens`` tokens."""
        held = tokens if self.window is None else min(tokens, self.window)
        return -(-held // self.block_size)

    def _skipped(self, tokens: int) -> int:
        """Leading table entries released past the window for a sequence of ``tokens`` tokens."""
        return -(-tokens // self.block_size) - self._kept(tokens)

    def _release(self, table: list, index: int) -> None:
        """Drop ``table[index]`` (out of the window): one reference less, the block freed if none is left."""
        block, table[index] = table[index], None
        self._ref[block] -= 1
        if self._ref[block] == 0:
            self._forget(block)
            self._to_free([block])

    def _put_back(self, blocks: list[int]) -> None:
        """Return extra blocks (ref 1, no key) to the free blocks."""
        for block in blocks:
            self._ref[block] = 0
        self._to_free(blocks)

    def _to_free(self, blocks: list[int]) -> None:
        """File blocks no table holds any more, in order: vllm-v1's queue tail, else the LRU cache when the
        block has a key and the plain free list when not."""
        if self._v1:
            self._lru.extend(blocks)
            return
        keys = [self._key[block] for block in blocks]
        self._lru.extend([block for key, block in zip(keys, blocks) if key is not None])
        self._free.extend(block for key, block in zip(keys, blocks) if key is None)

    def _unfree(self, block: int) -> None:
        """Take a free cached block out of the free blocks (a hit: vLLM's ``touch``)."""
        self._lru.remove(block)

    def _take(self) -> int:
        """A block for new content (caller checked there is one): :meth:`_take_many` of one."""
        return self._take_many(1)[0]

    def _take_many(self, count: int) -> list[int]:
        """``count`` blocks for new content, in the order they are taken (caller checked there are enough):
        vllm-v1's queue head; else plain free first, then the LRU cached. A block taken with a key is evicted
        (its key forgotten)."""
        key_of, evicted = self._key, 0
        if self._v1:
            blocks = self._lru.pop_many(count)
            for block in blocks:
                if key_of[block] is not None:
                    self._forget(block)
                    evicted += 1
        else:
            free = self._free  # (a plain free block carries no key)
            blocks = [free.popleft() for _ in range(min(count, len(free)))]
            if len(blocks) < count:
                cached = self._cached
                for block in self._lru.pop_many(count - len(blocks)):
                    del cached[key_of[block]]  # (uncached-first registers one block per key: no twin takes its place)
                    key_of[block] = None
                    blocks.append(block)
                    evicted += 1
        self.evictions += evicted
        ref = self._ref
        for block in blocks:
            ref[block] = 1
        return blocks

    def _take_for(self, seq_id, what: str) -> int:
        if not self.num_free_blocks:
            raise OutOfBlocksError(f"sequence {seq_id!r} needs {what} and none of {self.num_blocks} is free",
                                   1, 0)
        return self._take()

    def _register(self, block: int, key) -> None:
        """Make a full block findable by its key; if another block already carries that key, uncached-first
        leaves this one without a key and vllm-v1 registers it after that one (no deduplication)."""
        if not self.enable_prefix_caching:
            return
        if self._cached.setdefault(key, block) != block:
            if not self._v1:
                return
            self._twins.setdefault(key, []).append(block)
        self._key[block] = key

    def _forget(self, block: int) -> None:
        """Drop ``block``'s key: the next block registered with it (vllm-v1) takes its place in lookups."""
        key = self._key[block]
        if key is None:
            return
        self._key[block] = None
        twins = self._twins.get(key)
        if self._cached[key] != block:
            twins.remove(block)
        elif twins:
            self._cached[key] = twins.pop(0)
        else:
            del self._cached[key]
        if twins == []:
            del self._twins[key]
