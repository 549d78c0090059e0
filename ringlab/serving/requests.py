"""Requests and seeded request generators for the serving simulator.

A :class:`Request` is what a client sends: a prompt (token ids), how many tokens to generate and
how many samples (``n > 1``: parallel sampling, which forks the prompt's blocks and exercises
copy-on-write). :func:`poisson_requests` draws a trace: Poisson arrivals at ``rate`` per second
(exponential gaps), prompt and output lengths from a named distribution, and optionally a
system prompt shared by a fraction of the requests (what prefix caching reuses). Everything is a
function of the seed: the same arguments give the same trace on every machine.

A :class:`HashedPrompt` is the prompt of a replayed production trace, which gives lengths and, for Mooncake,
one hash id per 512-token block but no token ids (:mod:`ringlab.serving.traces`): token ids derived from the
hash ids, so that equal ids mean equal blocks, held in a few ints per block instead of one per token.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ringlab.validation import check_number
from ringlab.validation import positive_int

VOCAB_SIZE = 32_000  # Llama-2's vocabulary; token ids only need to be distinct, not meaningful
LENGTHS = ("fixed", "uniform", "exponential")
MAX_REQUESTS = 1_000_000  # a trace is built in memory, one tuple of token ids per request
MAX_MEAN_LEN = 1_000_000  # mean prompt or output tokens
# Token ids a run holds: the trace's prompts (tuples the engine and the block manager keep as given), plus
# each sample's output twice (the engine's and the block manager's lists), about 30-40 B each as Python ints.
# 1e7 is about 400 MB, and about the most the engine serves in a minute or two (it moves some 1e5 token ids a
# second).
MAX_TRACE_TOKENS = 10_000_000


def trace_tokens(requests: float, prompt_len: float, output_len: float, n: int = 1) -> float:
    """Expected token ids a simulation of ``requests`` requests holds at once at most: ``requests x (prompt_len +
    2 n output_len)`` (see :data:`MAX_TRACE_TOKENS`)."""
    return requests * (prompt_len + 2 * n * output_len)


@dataclass(frozen=True)
class Request:
    """One client request. ``prompt``: token ids (non-empty; a tuple of ints, or a :class:`HashedPrompt`);
    ``max_new_tokens``: output tokens per sample (>= 1); ``n``: samples (>= 1); ``arrival_s``: arrival time
    in seconds (>= 0)."""

    request_id: int
    arrival_s: float
    prompt: tuple | HashedPrompt
    max_new_tokens: int
    n: int = 1

    def __post_init__(self):
        if not self.prompt:
            raise ValueError(f"request {self.request_id}: prompt must not be empty")
        positive_int(self.max_new_tokens, "max_new_tokens")
        positive_int(self.n, "n")
        check_number("arrival_s", self.arrival_s)


class HashedPrompt(Sequence):
    """The token ids of a prompt known only by its length and the hash ids of its blocks (a production trace).

    ``length``: tokens (int >= 1); ``hash_ids``: one int >= 0 per block of ``hash_block`` tokens (int >= 1),
    ``ceil(length / hash_block)`` of them, the last block possibly partial. Token ``i`` is
    ``hash_ids[i // hash_block] * hash_block + i % hash_block``: one-to-one in (hash id, offset), so two
    prompts agree on a block's tokens exactly when they agree on its hash id. This is what Mooncake's trace
    means by its ids (FAST'25 release README: "remapped prefix block hashes. The block size is 512 tokens.
    Identical hash IDs indicate reusable prefix KV cache blocks"). The ids stand for content; they are not
    ids of any vocabulary (they reach ``max(hash_ids) * hash_block + hash_block - 1``).

    ``tail``: token ids (ints) that follow the ``length`` hashed tokens, as they are: the prompt a decode
    instance of disaggregated serving receives is the trace's prompt and the first token the prefill instance
    sampled (:meth:`then`). ``len`` counts both.

    An immutable sequence of ints held as its hash ids: ``len``, iteration (at C speed, over one ``range``
    per block), indexing, slicing (a tuple), and ``==`` and ``hash`` by token content. The block allocator keys
    its blocks from these tokens as from any other prompt's (one scheme, so a request preempted and recomputed
    from its token list finds its own blocks again), and a scheduler keeps the HashedPrompt, not a token list,
    while the request waits and once admitted. Raises TypeError/ValueError naming the bad argument.
    """

    __slots__ = ("_length", "_ids", "_block", "_hash", "_tail")

    def __init__(self, length: int, hash_ids, hash_block: int = 512, tail: Sequence[int] = ()):
        self._length = positive_int(length, "length")  # the hashed tokens; the tail follows them
        self._block = positive_int(hash_block, "hash_block")
        tail = tuple(tail)
        if any(isinstance(t, bool) for t in tail):
            raise TypeError(f"tail must hold integer token ids, got a bool in {tail!r:.80}")
        try:
            self._tail = tuple(map(operator.index, tail))
        except TypeError:
            raise TypeError(f"tail must hold integer token ids, got {tail!r:.80}") from None
        ids = tuple(hash_ids)
        if any(isinstance(h, bool) for h in ids):
            raise TypeError(f"hash_ids must be integers >= 0, got a bool in {ids!r:.80}")
        try:
            ids = tuple(map(operator.index, ids))
        except TypeError:
            raise TypeError(f"hash_ids must be integers >= 0, got {ids!r:.80}") from None
        need = -(-self._length // self._block)
        if len(ids) != need:
            raise ValueError(f"hash_ids: a prompt of {self._length:,} tokens in blocks of {self._block} has "
                             f"{need:,} blocks, so {need:,} hash ids, got {len(ids):,}")
        if min(ids) < 0:
            raise ValueError(f"hash_ids must be integers >= 0, got {min(ids)}")
        self._ids = ids
        self._hash = None  # computed when first asked: a waiting prompt is looked up again every step

    @property
    def hash_ids(self) -> tuple[int, ...]:
        """One id per block of :attr:`hash_block` tokens."""
        return self._ids

    @property
    def hash_block(self) -> int:
        """Tokens per hash id."""
        return self._block

    @property
    def hashed_length(self) -> int:
        """Tokens given by the hash ids (the rest is :attr:`tail`)."""
        return self._length

    @property
    def tail(self) -> tuple[int, ...]:
        """Token ids after the hashed ones."""
        return self._tail

    def then(self, tokens: Sequence[int]) -> HashedPrompt:
        """This prompt followed by ``tokens`` (ints), still held as hash ids."""
        return HashedPrompt(self._length, self._ids, self._block, self._tail + tuple(tokens))

    def _token(self, i: int) -> int:
        """Token ``i`` (0 <= i < len): the one formula of the class, then the tail."""
        if i >= self._length:
            return self._tail[i - self._length]
        return self._ids[i // self._block] * self._block + i % self._block

    def _ranges(self, start: int, stop: int) -> list[range]:
        """Tokens ``start`` .. ``stop - 1`` (0 <= start < stop <= len) as one range per hash block they touch,
        then one per tail token."""
        hb, out, hashed = self._block, [], min(stop, self._length)
        for first in range(start - start % hb, hashed, hb):  # within a hash block, tokens are consecutive
            lo, hi = max(start, first), min(hashed, first + hb)
            t = self._token(lo)
            out.append(range(t, t + hi - lo))
        out += (range(t, t + 1) for t in self._tail[max(start - self._length, 0):max(stop - self._length, 0)])
        return out

    def _runs(self, start: int, stop: int) -> tuple[range, ...]:
        """Tokens ``start`` .. ``stop - 1`` as maximal runs of consecutive ids: one form per token sequence."""
        runs: list[range] = []
        for r in self._ranges(start, stop):
            if runs and runs[-1].stop == r.start:
                runs[-1] = range(runs[-1].start, r.stop)
            else:
                runs.append(r)
        return tuple(runs)

    def __len__(self) -> int:
        return self._length + len(self._tail)

    def __iter__(self):
        return itertools.chain.from_iterable(self._ranges(0, len(self)))

    def __getitem__(self, index):
        n = len(self)
        if isinstance(index, slice):
            start, stop, step = index.indices(n)
            if step != 1:
                return tuple(self)[index]
            return tuple(itertools.chain.from_iterable(self._ranges(start, stop))) if start < stop else ()
        i = operator.index(index)
        i += n if i < 0 else 0
        if not 0 <= i < n:
            raise IndexError(f"token index {index} out of range for a prompt of {n} tokens")
        return self._token(i)

    def __eq__(self, other):
        if not isinstance(other, HashedPrompt):
            return NotImplemented
        return len(self) == len(other) and self._runs(0, len(self)) == other._runs(0, len(other))

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self._runs(0, len(self)))
        return self._hash

    def __repr__(self) -> str:
        ids = self.hash_ids if len(self.hash_ids) <= 6 else f"({', '.join(map(str, self.hash_ids[:3]))}, ... " \
            f"{len(self.hash_ids) - 3} more)"
        tail = f", tail={self._tail}" if self._tail else ""
        return f"HashedPrompt(length={self._length}, hash_ids={ids}, hash_block={self.hash_block}{tail})"


class SequenceTokens(Sequence):
    """A sequence's token ids as the engine and the block manager hold them: its ``prompt`` as given (a tuple or a
    :class:`HashedPrompt`, not copied: a trace's prompts reach 100k tokens, and listing each admitted one cost a
    tenth of a replay), then the tokens added since, ``out``, a list that grows at the end and is only ever cut
    back to a longer length. Reads as the list ``list(prompt) + out``: ``len``, iteration, indexing, slicing (a
    list); unhashable, since it grows."""

    __slots__ = ("prompt", "out", "_p")
    __hash__ = None  # it grows: never a dict key (the allocator lists an unhashable prompt for its memo)

    def __init__(self, prompt: Sequence, out: Sequence = ()):
        self.prompt, self.out, self._p = prompt, list(out), len(prompt)

    def __len__(self) -> int:
        return self._p + len(self.out)

    def __iter__(self):
        return itertools.chain(self.prompt, self.out)

    def __getitem__(self, index):
        p, n = self._p, self._p + len(self.out)
        if isinstance(index, slice):
            start, stop, step = index.indices(n)
            if step != 1:
                return list(self)[index]
            if start >= p:  # within the generated tokens: what a decode reads
                return self.out[start - p:max(stop, start) - p]  # (a negative stop would count from the end)
            return [*self.prompt[start:min(stop, p)], *self.out[:max(stop - p, 0)]]
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError(f"token index {index} out of range for {n} tokens")
        return self.out[i - p] if i >= p else self.prompt[i]

    def last(self) -> int:
        """The last token (a decode's input)."""
        return self.out[-1] if self.out else self.prompt[-1]

    def append(self, token: int) -> None:
        """Add one token at the end."""
        self.out.append(token)

    def extend(self, tokens) -> None:
        """Add ``tokens`` at the end."""
        self.out.extend(tokens)

    def truncate(self, length: int) -> None:
        """Keep the first ``length`` tokens (at least the prompt)."""
        del self.out[length - self._p:]

    def copy(self) -> SequenceTokens:
        """Another sequence of the same tokens: the prompt shared, the added tokens a list of its own."""
        return SequenceTokens(self.prompt, self.out)


def sampled_token(request_id: int, sample: int, position: int) -> int:
    """The token a sample "generates" at ``position``: a fixed function of its arguments, different for
    different samples of one request (so forks diverge) and the same on every run."""
    return (request_id * 1_000_003 + sample * 7_919 + position * 104_729) % VOCAB_SIZE


def _lengths(rng: np.random.Generator, kind: str, mean: int, count: int, name: str) -> np.ndarray:
    mean = positive_int(mean, name)
    if kind == "fixed":
        out = np.full(count, mean)
    elif kind == "uniform":  # 1 .. 2 mean - 1: mean `mean`
        out = rng.integers(1, 2 * mean, size=count)
    elif kind == "exponential":
        out = np.ceil(rng.exponential(mean, size=count))
    else:
        raise ValueError(f"{name} distribution must be one of {', '.join(LENGTHS)}, got {kind!r}")
    return np.maximum(out, 1).astype(np.int64)


def poisson_requests(num_requests: int | None = None, rate: float = 10.0, seconds: float | None = None,
                     prompt_len: int = 256, output_len: int = 128, length_dist: str = "uniform",
                     shared_prefix_len: int = 0, shared_fraction: float = 1.0, n: int = 1,
                     max_prompt_len: int | None = None, max_output_len: int | None = None,
                     seed: int = 0) -> list[Request]:
    """A seeded trace of requests with Poisson arrivals.

    Give ``num_requests`` (that many arrivals) or ``seconds`` (every arrival before that time), or both
    (whichever stops first). ``rate``: mean arrivals per second (> 0); gaps are exponential with mean
    1 / rate, the first arrival at 0 s. ``prompt_len`` / ``output_len``: mean lengths in tokens,
    drawn per ``length_dist`` (``fixed``, ``uniform`` on 1..2 mean - 1, or ``exponential`` rounded up),
    capped at ``max_prompt_len`` / ``max_output_len``. ``shared_prefix_len``: tokens of one system
    prompt put in front of the prompt of a ``shared_fraction`` of the requests (counted in their
    prompt length). ``n``: samples per request. Prompt tokens are drawn uniformly from the
    vocabulary, so unrelated prompts share no block.
    Raises ValueError/TypeError naming the bad argument (also above :data:`MAX_REQUESTS` requests,
    :data:`MAX_MEAN_LEN` mean tokens, or :data:`MAX_TRACE_TOKENS` token ids in all, checked before
    anything is drawn).
    """
    if num_requests is None and seconds is None:
        raise ValueError("give num_requests, seconds, or both")
    if num_requests is not None:
        num_requests = positive_int(num_requests, "num_requests")
    if seconds is not None:
        check_number("seconds", seconds, strict=True)
    check_number("rate", rate, strict=True)
    check_number("shared_fraction", shared_fraction)
    if shared_fraction > 1:
        raise ValueError(f"shared_fraction must be in [0, 1], got {shared_fraction}")
    if isinstance(shared_prefix_len, bool) or not isinstance(shared_prefix_len, int) or shared_prefix_len < 0:
        raise ValueError(f"shared_prefix_len must be an int >= 0, got {shared_prefix_len!r}")
    for name, value in (("prompt_len", prompt_len), ("output_len", output_len)):
        if positive_int(value, name) > MAX_MEAN_LEN:
            raise ValueError(f"{name}={value:,} tokens is above {MAX_MEAN_LEN:,}: no model serves such requests")
    expected = num_requests if num_requests is not None else rate * seconds
    if expected > MAX_REQUESTS:
        raise ValueError(f"{expected:,.0f} requests (rate x seconds) is above {MAX_REQUESTS:,}: shorten the trace")
    positive_int(n, "n")
    tokens = trace_tokens(expected, prompt_len, output_len, n)
    if tokens > MAX_TRACE_TOKENS:
        raise ValueError(f"{expected:,.0f} requests (rate x seconds) of prompt_len {prompt_len:,} and output_len "
                         f"{output_len:,} tokens (n={n}) hold about {tokens:,.0f} token ids, about "
                         f"{tokens * 40 / 1e9:,.1f} GB; at most {MAX_TRACE_TOKENS:,}: shorten the trace or the requests")
    rng = np.random.default_rng(seed)
    if num_requests is None:
        count = int(rate * seconds + 10 * np.sqrt(rate * seconds) + 10)  # Poisson tail: far beyond the count
    else:
        count = num_requests
    arrivals = np.concatenate([[0.0], np.cumsum(rng.exponential(1.0 / rate, size=count - 1))])
    if seconds is not None:
        arrivals = arrivals[arrivals < seconds]
    count = len(arrivals)
    prompts = _lengths(rng, length_dist, prompt_len, count, "prompt_len")
    outputs = _lengths(rng, length_dist, output_len, count, "output_len")
    if max_prompt_len is not None:
        prompts = np.minimum(prompts, positive_int(max_prompt_len, "max_prompt_len"))
    if max_output_len is not None:
        outputs = np.minimum(outputs, positive_int(max_output_len, "max_output_len"))
    shared = rng.random(count) < shared_fraction
    system = tuple(int(t) for t in rng.integers(0, VOCAB_SIZE, size=shared_prefix_len))
    out = []
    for i in range(count):
        own = max(1, int(prompts[i]) - (len(system) if shared[i] else 0))
        tokens = (system if shared[i] else ()) + tuple(int(t) for t in rng.integers(0, VOCAB_SIZE, size=own))
        out.append(Request(i, float(arrivals[i]), tokens, int(outputs[i]), n))
    return out
