"""A continuous-batching scheduler over the paged block allocator: admit, step, preempt.

Each *step* the engine runs one batch through the model: one decode token for every running
sequence and prefill chunks of newly admitted (or recomputed) requests, under a token budget
(``max_num_batched_tokens``) and a sequence budget (``max_num_seqs``), as vLLM and Orca do
(Yu et al., OSDI 2022). Requests wait in three queues: *waiting* (not yet admitted, or preempted by
recompute), *running* (holding blocks) and *swapped* (preempted by swap: their KV sits in host
memory). FCFS: requests are served in arrival order, and preempted ones go back to the front.

The fixed policy (``SchedulerConfig()``, the default), in this order each step:

1. **Grow the running first.** Oldest first, each decoding sequence gets the slot for its next token.
   When no block is free, the **newest** running request is preempted (recompute: its blocks are freed
   and it will prefill prompt + output again; swap: its blocks are copied to host memory), never the
   oldest. The oldest running request therefore always progresses, finishes, and hands the guarantee
   to the next: every request finishes (the tests check this on random traces).
2. Swap back swapped requests, then **admit** waiting ones, FCFS, while the token budget allows and
   the blocks they need plus one decode block each (**reserved decode room**) leave the watermark free.

The naive policy (``SchedulerConfig.naive()``) admits first, greedily, without reserving decode room
and with no watermark; a decoding sequence that then finds no free block is skipped and the newest
request is recompute-preempted to make room "for next step". But next step the admission runs first
again, re-admits that request into the room it left, and the decode finds no block again: the same
request is prefilled, evicted and prefilled again while nothing progresses. The scheduler recognises
it: once every request has arrived, a state (queues, lengths, allocator counts) seen before, with no
token generated since, means the run cycles for ever; it stops and reports ``livelock`` (notebook
15 shows one). States are only recorded while nothing progresses, so the check costs nothing in a healthy run.

Recomputing a preempted request (its prompt and output so far) is chunked over steps even without
chunked prefill, since it may exceed the token budget. Requests that can never be served are
rejected on arrival: one whose prompt and output exceed ``max_model_len`` (the model's context:
:func:`over_context`), a prompt longer than the token budget without chunked prefill, or (fixed policy) a
request whose worst case, ``n x blocks(prompt + max_new_tokens - 1)`` with nothing shared, exceeds the pool
less the watermark.

Blocks (:class:`~ringlab.serving.blocks.CacheLayout`): a sequence of ``L`` tokens holds ``blocks(L) =
ceil(sequence_kv_bytes(L) / block_bytes)``, ``ceil(L / block_size)`` for a model whose layers are alike; a
model with windowed layers or Mamba state holds its table of the layers that keep every token plus extra
blocks for the rest (``calc kv``'s count), and one whose every layer is windowed releases blocks past the
window (then without prefix caching). Admission, the reserved decode room, the arrival check, preemption
and swaps all count these blocks.

Time: each step takes :meth:`ringlab.serving.cost.StepCost.step_time` of its batch (the calc roofline)
plus swap transfers over the host link (the preset's ``host_link_bandwidth`` unless ``swap_bandwidth`` is
given: PCIe Gen4 32 GB/s on an A100, Gen5 64 GB/s on an H100, NVLink-C2C 450 GB/s on a GH200, each way,
nominal); with nothing to run the clock jumps to the next arrival.
A sample's first token appears at the end of the step that completes its prefill.

Speed: most steps of a long replay are plain decode steps, between an arrival, an admission, a finish or a
preemption. ``Scheduler(fast=True)``, the default, runs each such stretch at once (:meth:`Scheduler._decode_span`):
the same allocator calls in the same order where order matters, step times as one array, the same trace rows.
``fast=False`` is the step-by-step reference; the tests check that both give the same trace.
"""

from __future__ import annotations

import bisect
import gc
import threading
from collections import deque
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain, repeat


from ringlab.calc.models import get_model
from ringlab.validation import check_number
from ringlab.validation import positive_int
from ringlab.serving.blocks import POLICIES, BlockManager, OutOfBlocksError, block_content, block_contents, cache_layout
from ringlab.serving.cost import StepCost, host_link
from ringlab.serving.requests import Request, SequenceTokens, sampled_token
from ringlab.serving.trace import Trace

PREEMPTION_MODES = ("recompute", "swap")


MAX_BATCHED_TOKENS = 1 << 20  # tokens per step: the step-time table holds a few arrays this long
MAX_SPAN_STEPS = 4096  # decode steps the fast path runs at once (bounds its arrays)
SPAN_CHUNK = 32  # step times it computes at first


@dataclass(frozen=True)
class SchedulerConfig:
    """Scheduling policy and budgets.

    ``max_num_batched_tokens``: tokens per step (decode tokens + prefill chunk tokens); ``max_num_seqs``:
    sequences per step; ``chunked_prefill``: split prompts over steps (else a prompt is prefilled in one
    step and must fit the token budget); ``preemption``: ``recompute`` or ``swap``; ``reserve_decode``:
    the fixed step order (grow running first, admit leaving a decode block per request) rather than the
    naive one (admit first; a decode without a block waits); ``watermark``: fraction of
    the pool admission leaves free (vLLM's default is 0.01); ``swap_bandwidth``: host link bytes/s per
    direction, None (the default) for the hardware preset's ``host_link_bandwidth`` (nominal; pass e.g.
    25e9 for what pinned copies reach over PCIe Gen4);
    ``max_steps``: a guard that stops the run (the trace says it was truncated), None (the default) for
    :func:`step_limit` of the requests, which a run that never preempts cannot reach; ``prefix_policy``: which
    free block the allocator recycles, ``"uncached-first"`` or vLLM v1's single LRU queue ``"vllm-v1"``
    (:data:`ringlab.serving.blocks.POLICIES`);
    ``max_model_len``: the longest sequence (prompt + output tokens) the engine serves, None (the default) for the
    model's context, its config.json ``max_position_embeddings`` (where vLLM's default ``max_model_len`` comes
    from), or no limit when the config has none. A request with ``prompt + max_new_tokens > max_model_len`` is
    rejected on arrival, as vLLM's OpenAI-compatible server refuses one ("This model's maximum context length
    is ... tokens"): a trace replayed on a model of shorter context than the one that served it loses those
    requests rather than serving positions the model has no encoding for.
    """

    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 256
    chunked_prefill: bool = False
    preemption: str = "recompute"
    reserve_decode: bool = True
    watermark: float = 0.01
    swap_bandwidth: float | None = None
    max_steps: int | None = None
    prefix_policy: str = "uncached-first"
    max_model_len: int | None = None

    def __post_init__(self):
        if positive_int(self.max_num_batched_tokens, "max_num_batched_tokens") > MAX_BATCHED_TOKENS:
            raise ValueError(f"max_num_batched_tokens={self.max_num_batched_tokens:,} is above {MAX_BATCHED_TOKENS:,}: "
                             "step times are tabulated per batch size up front (vLLM's defaults are 2,048 to 16,384)")
        positive_int(self.max_num_seqs, "max_num_seqs")
        if self.max_steps is not None:
            positive_int(self.max_steps, "max_steps")
        if self.max_model_len is not None:
            positive_int(self.max_model_len, "max_model_len")
        for name in ("chunked_prefill", "reserve_decode"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if self.prefix_policy not in POLICIES:
            raise ValueError(f"prefix_policy must be one of {', '.join(POLICIES)}, got {self.prefix_policy!r}")
        if self.preemption not in PREEMPTION_MODES:
            raise ValueError(f"preemption must be one of {', '.join(PREEMPTION_MODES)}, got {self.preemption!r}")
        check_number("watermark", self.watermark)
        if self.watermark >= 1:
            raise ValueError(f"watermark must be a fraction in [0, 1), got {self.watermark}")
        if self.swap_bandwidth is not None:
            check_number("swap_bandwidth", self.swap_bandwidth, strict=True)

    @classmethod
    def naive(cls, **changes) -> SchedulerConfig:
        """The livelocking policy: admit first without reserving decode room, and no watermark."""
        return cls(**{"reserve_decode": False, "watermark": 0.0, **changes})


def over_context(request: Request, model, max_model_len: int | None = None) -> str:
    """Why ``request`` is longer than the engine serves, or "" when it is not: its ``prompt + max_new_tokens``
    tokens against ``max_model_len``, None for ``model``'s context (its config.json ``max_position_embeddings``,
    where vLLM's default ``max_model_len`` comes from; no limit when the config has none). The rule of vLLM's
    OpenAI-compatible server ("This model's maximum context length is ... tokens"); :class:`Scheduler` rejects
    such a request on arrival at any rate and any configuration. ``model``: a preset name or ModelConfig."""
    limit = max_model_len
    source = "max_model_len"
    if limit is None:
        model = get_model(model)
        limit, source = model.max_position_embeddings, f"max_model_len, {model.name}'s max_position_embeddings"
    if limit is None or len(request.prompt) + request.max_new_tokens <= limit:
        return ""
    return f"prompt {len(request.prompt):,} + output {request.max_new_tokens:,} tokens exceed {source}={limit:,}"


STEP_LIMIT_SLACK = 1_000_000  # steps :func:`step_limit` adds for recomputed tokens and steps that compute none


def step_limit(requests: Iterable[Request]) -> int:
    """The default ``max_steps`` of a run of ``requests``: the tokens they ask the engine to compute
    (``prompt + n * max_new_tokens`` each) plus :data:`STEP_LIMIT_SLACK`. A step that schedules anything computes
    at least one token (a decode, or a prefill chunk), and a prompt is computed once for all its samples, so a
    run without preemptions ends within that many steps: a trace is never cut short for being long (one
    decode instance serving a whole trace one request at a time takes a step per output token). The slack is
    for preemptions, whose recomputed tokens the count leaves out."""
    return STEP_LIMIT_SLACK + sum(len(r.prompt) + r.n * r.max_new_tokens for r in requests)


_gc_lock = threading.Lock()
_gc_runs = [0, None]  # runs inside _rare_collections now, and the thresholds to restore when none is left


@contextmanager
def _rare_collections():
    """Run the cyclic garbage collector about 100 times less often, restoring its thresholds when the last run
    inside ends (runs may nest or overlap in threads). A trace replay keeps millions of small tuples alive
    (every block's key), and CPython's collector, which runs after every 700 new container objects, rescans
    them: about a sixth of a full Mooncake replay went to it. The replay makes no reference cycles that need
    prompt collection; cycles elsewhere are still collected."""
    with _gc_lock:
        if not _gc_runs[0]:
            _gc_runs[1] = gc.get_threshold()
            gc.set_threshold(max(_gc_runs[1][0], 100_000), *_gc_runs[1][1:])
        _gc_runs[0] += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_runs[0] -= 1
            if not _gc_runs[0]:
                gc.set_threshold(*_gc_runs[1])


@dataclass(eq=False)
class _Group:
    """A request in the engine. Per live sample: token ids (prompt + generated: the request's prompt object until
    first admitted, a :class:`SequenceTokens` from then on), tokens generated, and while prefilling the tokens with KV;
    ``slotted``: samples whose last token already has its slot."""

    request: Request
    tokens: dict = field(default_factory=dict)  # sample -> token ids; finished samples are removed
    generated: dict = field(default_factory=dict)  # sample -> tokens generated
    computed: dict = field(default_factory=dict)  # sample -> tokens with KV (only while prefilling)
    slotted: set = field(default_factory=set)
    output_tokens: int = 0
    first_scheduled_s: float | None = None
    first_token_s: float | None = None
    finish_s: float | None = None
    preemptions: int = 0
    swap_blocks: int = 0  # distinct blocks it holds in host memory while swapped

    @property
    def rid(self) -> int:
        return self.request.request_id

    @property
    def age(self) -> tuple:
        return self.request.arrival_s, self.request.request_id

    @property
    def prefilling(self) -> bool:
        return bool(self.computed)


class Scheduler:
    """Run ``requests`` (any order; served by arrival) through a paged KV cache of ``num_blocks`` blocks.

    Args: ``model`` / ``hardware`` (presets or objects for the step time); ``num_blocks`` and
    ``block_size`` of the pool; ``config`` a :class:`SchedulerConfig`; ``enable_prefix_caching``;
    ``dtype`` of weights and cache; ``tp``: tensor-parallel GPUs serving one replica (step times of
    :class:`~ringlab.serving.cost.StepCost`; the pool is the blocks of that group). :meth:`run` returns a :class:`~ringlab.serving.trace.Trace`;
    ``check_invariants=True`` checks the allocator's books after every step (tests). ``prefilled=True`` makes it
    a decode instance of disaggregated serving (:mod:`ringlab.serving.disagg`): each request's prompt arrives with
    its KV cache computed elsewhere, so admission allocates the prompt's blocks and computes only its last token
    (the first token, sampled by the prefill instance, whose KV is made by the first decode step here); a request
    preempted by recompute computes its whole context again here. Parallel sampling (n > 1) is refused then.
    ``fast=True`` (the default) runs stretches of plain decode steps in bulk (:meth:`_decode_span`) with the same
    trace as ``fast=False``, the step-by-step reference.
    Raises ValueError/TypeError for bad arguments.
    """

    def __init__(self, model, hardware, num_blocks: int, block_size: int = 16,
                 config: SchedulerConfig | None = None, enable_prefix_caching: bool = True,
                 dtype: str = "bf16", check_invariants: bool = False, tp: int = 1, prefilled: bool = False,
                 fast: bool = True):
        self.config = config if config is not None else SchedulerConfig()
        if not isinstance(prefilled, bool):
            raise TypeError(f"prefilled must be a bool, got {prefilled!r}")
        self.prefilled = prefilled
        if not isinstance(fast, bool):
            raise TypeError(f"fast must be a bool, got {fast!r}")
        self.fast = fast
        if not isinstance(self.config, SchedulerConfig):
            raise TypeError(f"config must be a SchedulerConfig, got {type(config).__name__}")
        num_blocks = positive_int(num_blocks, "num_blocks")
        watermark = int(self.config.watermark * num_blocks)
        self.cost = StepCost(model, hardware, self.config.max_num_batched_tokens, dtype=dtype, tp=tp)
        self.layout = cache_layout(self.cost.model, block_size, dtype)
        self.blocks = BlockManager(num_blocks, block_size, watermark,
                                   enable_prefix_caching and self.layout.window is None, self.layout.window,
                                   policy=self.config.prefix_policy)
        self.block_bytes = self.layout.block_bytes
        self.swap_bandwidth = host_link(self.cost.hardware, self.config.swap_bandwidth,
                                        needed=self.config.preemption == "swap")
        self.check = check_invariants

    # ---- the run -----------------------------------------------------------------------------
    def run(self, requests: list[Request]) -> Trace:
        """Serve every request; stop when all are done, on a detected livelock, or at ``max_steps`` (then the
        trace's ``truncated`` says so and why: the run is partial)."""
        with _rare_collections():
            return self._run(requests)

    def _run(self, requests: list[Request]) -> Trace:
        pending = deque(sorted(requests, key=lambda r: (r.arrival_s, r.request_id)))
        if len({r.request_id for r in pending}) != len(pending):
            raise ValueError("request ids must be unique")
        self.max_steps = self.config.max_steps or step_limit(pending)
        self.trace = Trace(self.blocks.num_blocks, self.blocks.block_size)
        self.waiting: deque[_Group] = deque()
        self.running: list[_Group] = []  # kept oldest first
        self.swapped: deque[_Group] = deque()
        self.groups: dict[int, _Group] = {}
        self.now, seen, progress, self.outputs = 0.0, {}, 0, 0
        self._refused_head: _Group | None = None  # the request the last admission left waiting at the front
        self._watched: tuple = (None, (), set())  # _block_contents of the last head looked at
        while True:
            while pending and pending[0].arrival_s <= self.now:
                self._arrive(pending.popleft())
            if not (self.waiting or self.running or self.swapped):
                if not pending:
                    break
                self.now = pending[0].arrival_s
                continue
            step = self.trace.num_steps
            if step == self.max_steps:
                self.trace.event(step, self.now, "step limit", None, f"stopped after max_steps={step}")
                left = len(pending) + len(self.waiting) + len(self.running) + len(self.swapped)
                self.trace.truncated = (f"stopped at max_steps={step:,} with {left:,} request(s) not done; "
                                        "the numbers cover the simulated part only")
                for request in pending:  # never arrived: in the trace as unfinished, so every request is counted
                    self.groups[request.request_id] = _Group(request)
                break
            if not (self.fast and self._decode_span(step, pending[0].arrival_s if pending else None)):
                self._step(step)
            if self.check:
                self.blocks.check_invariants()
            if self.outputs > progress:  # a cycle makes no progress: states before this step cannot recur
                progress, seen = self.outputs, {}
            elif not pending:
                state = self._fingerprint()
                if state in seen:
                    self.trace.event(step, self.now, "livelock", None,
                                     f"state of step {seen[state]} again: the run cycles with period "
                                     f"{step - seen[state]} steps and never finishes")
                    self.trace.livelock = (seen[state], step)
                    break
                seen[state] = step
        self.trace.finish(list(self.groups.values()), self.blocks, self.now)
        return self.trace

    # ---- arrival and admission checks ----------------------------------------------------------
    def _arrive(self, request: Request) -> None:
        group = _Group(request)
        self.groups[request.request_id] = group
        self.trace.event(None, self.now, "arrive", request.request_id, f"prompt {len(request.prompt)}, "
                         f"output {request.max_new_tokens}, n {request.n}")
        reason = self._never_fits(request)
        if reason:
            group.finish_s = self.now
            self.trace.reject(request.request_id, reason)
            self.trace.event(None, self.now, "reject", request.request_id, reason)
            return
        # the prompt itself until admission (a trace's HashedPrompt is a few ints a block): waiting requests hold
        # no token list, so a replay's memory follows the requests in the engine, not the trace's length
        group.tokens, group.generated = {0: request.prompt}, {0: 0}
        self.waiting.append(group)

    def _never_fits(self, request: Request) -> str:
        cfg = self.config
        too_long = over_context(request, self.cost.model, cfg.max_model_len)
        if too_long:
            return too_long
        if self.prefilled and request.n > 1:
            return f"a decode instance (prefilled=True) serves one sample per request, not n={request.n}"
        if not cfg.chunked_prefill and not self.prefilled and len(request.prompt) > cfg.max_num_batched_tokens:
            return (f"prompt of {len(request.prompt)} tokens exceeds max_num_batched_tokens="
                    f"{cfg.max_num_batched_tokens} without chunked prefill")
        if request.n > cfg.max_num_seqs:
            return f"its {request.n} samples exceed max_num_seqs={cfg.max_num_seqs}"
        room = self.blocks.usable_blocks
        prompt = self._blocks(len(request.prompt)) + (request.n - 1) * self._extra(len(request.prompt))
        if self.blocks.never_fits(prompt):
            return f"prompt needs {prompt} blocks; the pool has {room} above the watermark"
        if cfg.reserve_decode:
            worst = request.n * self._blocks(len(request.prompt) + request.max_new_tokens - 1)
            if self.blocks.never_fits(worst):
                return f"its worst case needs {worst} blocks, {room} are above the watermark: it could never finish"
        return ""

    # ---- one step ----------------------------------------------------------------------------
    def _step(self, step: int) -> None:
        self.batch_decode: list[tuple[_Group, int]] = []
        self.batch_prefill: list[tuple[_Group, int, int]] = []  # (group, sample, chunk tokens)
        self.tokens_left = self.config.max_num_batched_tokens
        self.seqs_left = self.config.max_num_seqs
        self.step_id, self.extra_s, self.wasted = step, 0.0, 0
        if self.config.reserve_decode:
            self._schedule_running()
            self._swap_in()
            self._admit()
        else:
            self._admit()
            self._schedule_running()
        self._execute()

    def _schedule_running(self) -> None:
        """Prefill chunks of admitted requests and one decode slot per decoding sequence, oldest first."""
        for group in list(self.running):
            if group not in self.running:  # preempted earlier in this loop
                continue
            if group.prefilling:
                if not any(g is group for g, _, _ in self.batch_prefill):  # not admitted this very step
                    self._schedule_prefill(group)
                continue
            if self.seqs_left < len(group.tokens) or self.tokens_left < len(group.tokens):
                break  # budgets spent: the rest wait for the next step
            for sample in list(group.tokens):
                if not self._decode_slot(group, sample):
                    break
            if group in self.running:
                self.seqs_left -= len(group.tokens)

    def _decode_slot(self, group: _Group, sample: int) -> bool:
        """Give ``sample``'s last token its slot, preempting while none is free. False if it must wait."""
        seq = (group.rid, sample)
        while sample not in group.slotted:
            try:
                self.blocks.hold(seq, self._extra(len(group.tokens[sample])))
                self.blocks.append_token(seq, group.tokens[sample].last())
                group.slotted.add(sample)
            except OutOfBlocksError:
                victim = self._victim(group)
                if not self.config.reserve_decode:
                    # naive: skip this decode and evict someone "to make room for next step"
                    self._preempt(victim, "recompute")
                    return False
                self._preempt(victim, self.config.preemption)
                if victim is group:
                    return False
        self.batch_decode.append((group, sample))
        self.tokens_left -= 1
        return True

    def _victim(self, needy: _Group) -> _Group:
        """The newest running request (possibly ``needy`` itself): never the oldest while another runs."""
        if self.config.reserve_decode and len(self.running) == 1:
            raise RuntimeError(f"request {needy.rid} is alone and finds no free block: the arrival check "
                               "should have rejected it (a scheduler bug)")
        return self.running[-1]

    def _preempt(self, group: _Group, mode: str) -> None:
        if mode == "swap" and group.prefilling:
            mode = "recompute"  # a half-computed prompt is cheaper to redo than to move
        self.running.remove(group)
        group.preemptions += 1
        self.batch_decode = [(g, s) for g, s in self.batch_decode if g is not group]
        self.wasted += sum(c for g, _, c in self.batch_prefill if g is group)  # computed, then thrown away
        self.batch_prefill = [(g, s, c) for g, s, c in self.batch_prefill if g is not group]
        held = {b for sample in group.tokens for b in self.blocks.held_blocks((group.rid, sample))}
        for sample in group.tokens:
            self.blocks.free((group.rid, sample))
        group.slotted.clear()
        if mode == "swap":
            group.swap_blocks = len(held)
            self.extra_s += len(held) * self.block_bytes / self.swap_bandwidth
            self._insert_front(self.swapped, group)
        else:
            group.computed = {}
            self._insert_front(self.waiting, group)
        self.trace.preempt(mode, len(held))
        self.trace.event(self.step_id, self.now, "preempt", group.rid, f"{mode}, {len(held)} blocks")

    @staticmethod
    def _insert_front(queue: deque, group: _Group) -> None:
        """Put a preempted request back ahead of later arrivals, in arrival order among the preempted."""
        items = list(queue)
        items.insert(bisect.bisect_left([g.age for g in items], group.age), group)
        queue.clear()
        queue.extend(items)

    def _blocks(self, tokens: int) -> int:
        """Blocks a sequence of ``tokens`` tokens holds sharing nothing: the layout's ``blocks``, as the sum of
        its table and extra blocks, which needs no per-layer sum once the extra count is memoised."""
        return self.layout.table_blocks(tokens) + self._extra(tokens)

    def _extra(self, tokens: int) -> int:
        """Blocks a sequence of ``tokens`` tokens holds outside its table (windowed layers, Mamba state)."""
        return self.layout.extra_blocks(tokens)

    def _decode_room(self, group: _Group, swapping_in: bool = False) -> int:
        """Blocks ``group``'s next decode will take (the reserved decode room): a new block for each sample
        whose slots end on a block boundary, and after a first prefill of ``n > 1`` samples, one
        copy-on-write block per fork sharing the prompt's partial last block; plus the growth of each
        sample's extra blocks (:meth:`_extra`)."""
        bs, request = self.blocks.block_size, group.request
        if group.first_token_s is None:  # a fresh prompt: its samples fork after the prefill
            if request.max_new_tokens == 1:
                return 0
            p = len(request.prompt)
            grow = request.n * (self._extra(p + 1) - self._extra(p))
            return grow + (request.n if p % bs == 0 else request.n - 1)
        if swapping_in:  # samples get slots for all but their last token, whose slot is taken at once
            return sum(int((len(t) - 1) % bs == 0) + self._extra(len(t)) - self._extra(len(t) - 1)
                       for t in group.tokens.values())
        # recompute prefills every token, samples one more, then decodes it unless that was the last
        return sum(int(len(t) % bs == 0) + self._extra(len(t) + 1) - self._extra(len(t))
                   for s, t in group.tokens.items() if group.generated[s] + 1 < request.max_new_tokens)

    def _held_on_admission(self, group: _Group, lists: list) -> int:
        """Extra blocks ``group`` holds once admitted: each sample's, and for a fresh prompt of ``n`` samples
        its children's too (held by the first sample until they fork)."""
        if group.first_token_s is None:
            return group.request.n * self._extra(len(lists[0]))
        return sum(self._extra(len(t)) for t in lists)

    def _room(self, token_lists: list, reserve: int) -> bool:
        """Whether new sequences of ``token_lists`` plus ``reserve`` blocks fit above the watermark. Each list
        takes at most its table's blocks (all of them when it shares nothing), so when those fit the allocator
        is not asked to look its prompt up."""
        room = self.blocks.admission_room
        if sum(self.layout.table_blocks(len(t)) for t in token_lists) + reserve <= room:
            return True
        return self.blocks.blocks_needed(token_lists) + reserve <= room

    def _swap_in(self) -> None:
        """Bring swapped requests back (before any new admission), oldest first, with their decode slots."""
        while self.swapped:
            group = self.swapped[0]
            lists = [tokens[:-1] for tokens in group.tokens.values()]  # the last sampled token has no KV yet
            room = self._room(lists, self._decode_room(group, swapping_in=True)
                              + sum(self._extra(len(t)) for t in lists))
            if self.seqs_left < len(lists) or self.tokens_left < len(lists) or not room:
                return
            self.swapped.popleft()
            for sample, tokens in zip(group.tokens, lists):
                self.blocks.allocate((group.rid, sample), tokens)
                self.blocks.hold((group.rid, sample), self._extra(len(tokens)))
            self.extra_s += group.swap_blocks * self.block_bytes / self.swap_bandwidth
            self.trace.event(self.step_id, self.now, "swap in", group.rid, f"{group.swap_blocks} blocks")
            group.swap_blocks = 0
            bisect.insort(self.running, group, key=lambda g: g.age)
            for sample in list(group.tokens):
                self._decode_slot(group, sample)
            if group in self.running:
                self.seqs_left -= len(lists)

    def _admit(self) -> None:
        """Admit waiting requests FCFS while budgets and blocks allow; the first that does not fit waits."""
        while self.waiting:
            group = self.waiting[0]
            if self._refused(group):
                self._refused_head = group
                return
            lists = list(group.tokens.values())
            arrived = self.prefilled and not group.preemptions  # its prompt's KV came from a prefill instance
            self.waiting.popleft()
            fresh = group.first_token_s is None
            for sample, tokens in group.tokens.items():
                hits = self.blocks.prefix_cache_hits
                self.blocks.allocate((group.rid, sample), tokens)
                if type(tokens) is not SequenceTokens:  # a fresh prompt: its samples grow from here
                    group.tokens[sample] = SequenceTokens(tokens)
                self.blocks.hold((group.rid, sample), (group.request.n if fresh else 1) * self._extra(len(tokens)))
                cached = (self.blocks.prefix_cache_hits - hits) * self.blocks.block_size
                # the last token is always computed
                group.computed[sample] = len(tokens) - 1 if arrived else min(cached, len(tokens) - 1)
            if group.first_scheduled_s is None:
                group.first_scheduled_s = self.now
            bisect.insort(self.running, group, key=lambda g: g.age)
            self.trace.event(self.step_id, self.now, "admit", group.rid,
                             f"{sum(len(t) for t in lists)} tokens, {sum(group.computed.values())} cached")
            self._schedule_prefill(group)
            self.seqs_left -= len(lists)

    def _refused(self, group: _Group) -> str:
        """Why admission must leave ``group`` waiting now ("" if it need not): ``budget`` (sequences or tokens),
        ``blocks`` (with its reserve, above the watermark), or ``uncached`` (without chunked prefill, a fresh
        prompt's uncached tokens exceed the token budget left)."""
        cfg = self.config
        lists = list(group.tokens.values())
        if self.seqs_left < len(lists) or self.tokens_left < 1:
            return "budget"
        reserve = self._held_on_admission(group, lists) + (self._decode_room(group) if cfg.reserve_decode else 0)
        if not self._room(lists, reserve):
            return "blocks"
        arrived = self.prefilled and not group.preemptions  # its prompt's KV came from a prefill instance
        resumed = group.first_token_s is not None  # recomputing prompt + output: chunked whatever the config
        if not (cfg.chunked_prefill or resumed):  # the uncached part must fit this step's budget
            uncached = len(lists) if arrived else sum(len(t) - min(self.blocks.cached_tokens(t), len(t) - 1)
                                                      for t in lists)
            if uncached > self.tokens_left:
                return "uncached"
        return ""

    def _schedule_prefill(self, group: _Group) -> None:
        for sample, tokens in group.tokens.items():
            chunk = min(len(tokens) - group.computed[sample], self.tokens_left)
            if chunk > 0:
                self.batch_prefill.append((group, sample, chunk))
                self.tokens_left -= chunk

    # ---- running the batch ---------------------------------------------------------------------
    def _execute(self) -> None:
        tokens = len(self.batch_decode) + sum(c for _, _, c in self.batch_prefill) + self.wasted
        kv_read = attended = 0  # bytes of cache read (windowed layers capped), tokens attended
        read = self.cost.kv_bytes_read
        for group, sample in self.batch_decode:
            context = len(group.tokens[sample])
            kv_read += read(context)
            attended += context
        for group, sample, chunk in self.batch_prefill:
            done = group.computed[sample]
            kv_read += read(done + chunk)
            attended += chunk * done + chunk * (chunk + 1) // 2
        if self.wasted:  # a thrown-away prefill, charged as if from scratch
            kv_read += read(self.wasted)
        attended += self.wasted * (self.wasted + 1) // 2
        seconds = self.extra_s + (self.cost.step_time(tokens, 0, attended, kv_read) if tokens else 0.0)
        start, self.now = self.now, self.now + seconds
        for group, sample, chunk in self.batch_prefill:
            group.computed[sample] += chunk
        done = {id(g): g for g, _, _ in self.batch_prefill if all(
            g.computed[s] == len(t) for s, t in g.tokens.items())}
        for group in done.values():
            group.computed = {}
            self._sampled(group, list(group.tokens))
        by_group: dict[int, tuple[_Group, list]] = {}
        for group, sample in self.batch_decode:
            by_group.setdefault(id(group), (group, []))[1].append(sample)
        for group, samples in by_group.values():
            self._sampled(group, samples)
        self.trace.step(start, self.now, len(self.batch_decode), tokens - len(self.batch_decode) - self.wasted,
                        self.wasted, len(self.running), len(self.waiting), len(self.swapped),
                        self.blocks.num_free_blocks)

    def _sampled(self, group: _Group, samples: list) -> None:
        """Each of ``samples`` of ``group`` produced one token at the end of this step."""
        request = group.request
        if group.first_token_s is None:
            group.first_token_s = self.now
            extra = self._extra(len(group.tokens[0]))
            if request.n > 1:  # the first sample held its children's extra blocks: hand them over
                self.blocks.hold((group.rid, 0), extra)
            for child in range(1, request.n):  # parallel sampling: children share the prompt's blocks
                self.blocks.fork((group.rid, 0), (group.rid, child))
                self.blocks.hold((group.rid, child), extra)
                group.tokens[child], group.generated[child] = group.tokens[0].copy(), 0
                samples.append(child)
        for sample in samples:
            tokens = group.tokens[sample]
            tokens.append(sampled_token(group.rid, sample, len(tokens)))
            group.generated[sample] = group.generated.get(sample, 0) + 1
            group.slotted.discard(sample)
            group.output_tokens += 1
            self.outputs += 1
            if group.generated[sample] == request.max_new_tokens:
                self.blocks.free((group.rid, sample))
                del group.tokens[sample], group.generated[sample]
        if not group.tokens:
            self.running.remove(group)
            group.finish_s = self.now
            self.trace.event(self.step_id, self.now, "finish", group.rid, f"{group.output_tokens} tokens")

    # ---- the fast path: plain decode steps in bulk -----------------------------------------------
    def _decode_span(self, step: int, next_arrival: float | None) -> int:
        """Run steps ``step``, ``step + 1``, ... at once while the reference would run each as a plain decode
        step, and return how many (0: none; the caller runs :meth:`_step`).

        A step is plain when every running request decodes all its samples and nothing else can happen:
        nothing is swapped; nothing waits, or (fixed policy) the waiting head is refused (:meth:`_refused`);
        nothing arrives before the step starts; no sample finishes before the span's last step; and the blocks
        the decodes take (new blocks and copy-on-write copies, counted with none freed) fit the free ones, so
        nothing is preempted. Models with extra blocks (windowed layers beside full ones, Mamba state) always
        take the reference path.

        A head refused for its budget stays refused while the running set does. One refused for blocks (or its
        uncached tokens) can only be let in by a decode that fills a block with the tokens of one of its blocks
        (a key it would then find) or that frees a block (a fill that switches to an equal cached block): taking
        blocks only shrinks the room. So the head is checked again after each step with such a fill, and when
        it would be admitted there, that step is finished by the reference (:meth:`_hand_over`).

        The span changes the books in the reference's order wherever order matters: each token that takes or
        fills a block goes through :meth:`BlockManager.append_token` step by step, oldest request first, the
        tokens between them through one :meth:`BlockManager.extend_within_block` each; samples that finish
        free their blocks after the last step's appends, oldest first. Step times are
        :meth:`StepCost.step_times` (equal to :meth:`StepCost.step_time` bit for bit), the clock adds them one
        by one, and the trace gets one row per step.
        """
        cfg, running, bs = self.config, self.running, self.blocks.block_size
        if not running or self.swapped or self.layout.has_extra or any(g.computed or g.slotted for g in running):
            return 0
        width = sum(len(g.tokens) for g in running)  # decode tokens per step
        if width > cfg.max_num_seqs or width > cfg.max_num_batched_tokens:
            return 0
        watch = None  # the waiting head's block contents, while blocks keep it out
        if self.waiting:
            head = self.waiting[0]
            if head is not self._refused_head:  # not refused yet: the reference step will most likely admit it
                return 0
            self.seqs_left, self.tokens_left = cfg.max_num_seqs - width, cfg.max_num_batched_tokens - width
            refused = self._refused(head) if cfg.reserve_decode else ""
            if not refused:
                return 0
            if refused != "budget":
                watch = self._block_contents(head)
        seqs = [(g, sample, tokens) for g in running for sample, tokens in g.tokens.items()]
        lengths = [len(tokens) for _, _, tokens in seqs]
        span = min(MAX_SPAN_STEPS, self.max_steps - step,
                   min(g.request.max_new_tokens - done for g in running for done in g.generated.values()))
        starts, ends = self._span_clock(width, lengths, span, next_arrival)
        span = len(starts)
        # (step, sequence) -> 1 if its append takes a block (new, or a copy of a shared last one), 0 if it only fills one
        events, takes = {}, []
        for i, (g, sample, tokens) in enumerate(seqs):
            held = lengths[i] - 1  # the allocator lags one token: the last sampled one has no slot yet
            for k in range((-held - 1) % bs, span, bs):
                events[k, i] = 0
            take = range(-held % bs, span, bs)
            takes += take
            events.update(((k, i), 1) for k in take)
            # only a fork (n > 1) shares a partial block: until each sample's first decode copies it
            if g.request.n > 1 and held % bs and self.blocks.ref_count(self.blocks.block_table((g.rid, sample))[-1]) > 1:
                takes.append(0)
                events[0, i] = 1
        free = self.blocks.num_free_blocks
        if len(takes) > free:  # stop before the step whose blocks would run out (the reference preempts there)
            span = sorted(takes)[free]
            if not span:
                return 0
        for i, (g, sample, tokens) in enumerate(seqs):
            tokens.extend(map(sampled_token, repeat(g.rid, span), repeat(sample, span),
                              range(lengths[i], lengths[i] + span)))
        done, free_after = [0] * len(seqs), []  # span tokens each allocator list has; free blocks per step
        # where in its generated tokens each sequence's next append is (a decoding sample has sampled one)
        bases = [n - 1 - len(tokens.prompt) for n, (_, _, tokens) in zip(lengths, seqs)]
        append, extend = self.blocks.append_token, self.blocks.extend_within_block
        recheck = False  # a step let the head in, maybe
        for (k, i), took in sorted(events.items()):
            if k >= span:
                break
            if k > len(free_after):  # step len(free_after) is complete
                if recheck and not self._refused(head):
                    return self._hand_over(step, seqs, lengths, bases, done, free_after, starts, ends)
                recheck = False
                free_after += [self.blocks.num_free_blocks] * (k - len(free_after))
            g, sample, tokens = seqs[i]
            out, base = tokens.out, bases[i]
            if done[i] < k:
                extend((g.rid, sample), out[base + done[i]:base + k])
            before = self.blocks.num_free_blocks
            append((g.rid, sample), out[base + k])
            done[i] = k + 1
            if watch is not None and (self.blocks.num_free_blocks > before - took or (lengths[i] + k) % bs == 0
                                      and block_content(tuple(tokens[lengths[i] + k - bs:lengths[i] + k])) in watch):
                recheck = True
        if recheck and not self._refused(head):
            return self._hand_over(step, seqs, lengths, bases, done, free_after, starts, ends)
        free_after += [self.blocks.num_free_blocks] * (span - len(free_after))
        for i, (g, sample, tokens) in enumerate(seqs):
            if done[i] < span:
                extend((g.rid, sample), tokens.out[bases[i] + done[i]:bases[i] + span])
        before, now = len(running), ends[span - 1]
        self._advance(step, seqs, span, starts, ends)
        for g in list(running):
            for sample in list(g.tokens):
                if g.generated[sample] == g.request.max_new_tokens:
                    self.blocks.free((g.rid, sample))
                    del g.tokens[sample], g.generated[sample]
            if not g.tokens:
                running.remove(g)
                g.finish_s = now
                self.trace.event(self.step_id, now, "finish", g.rid, f"{g.output_tokens} tokens")
        free_after[-1] = self.blocks.num_free_blocks
        waiting = len(self.waiting)
        self.trace.steps_from(zip(starts[:span], ends, repeat(width), repeat(0), repeat(0),
                                  chain(repeat(before, span - 1), (len(running),)), repeat(waiting), repeat(0),
                                  free_after))
        return span

    def _block_contents(self, group: _Group) -> set:
        """The contents of ``group``'s full blocks (:func:`~ringlab.serving.blocks.block_contents`; remembered
        for the waiting head: a sample's tokens are only ever appended to, so its samples and their lengths
        tell whether they changed)."""
        size = tuple((sample, len(t)) for sample, t in group.tokens.items())
        if self._watched[:2] != (group, size):
            bs = self.blocks.block_size
            self._watched = (group, size, set().union(*(block_contents(t, bs) for t in group.tokens.values())))
        return self._watched[2]

    def _advance(self, step: int, seqs: list, steps: int, starts: list, ends: list) -> None:
        """Count ``steps`` decode tokens for each of ``seqs`` (their token lists already hold them) and move the
        clock and the step id to the end of the last."""
        for g, sample, _ in seqs:
            g.generated[sample] += steps
            g.output_tokens += steps
        self.outputs += len(seqs) * steps
        self.step_id, self.now = step + steps - 1, ends[steps - 1] if steps else self.now

    def _hand_over(self, step: int, seqs: list, lengths: list, bases: list, done: list, free_after: list,
                   starts: list, ends: list) -> int:
        """End a span at step ``k = len(free_after)``, whose decode appends are made and after which the waiting
        head would be admitted: record steps before ``k``, then finish step ``k`` as :meth:`_step` would after
        :meth:`_schedule_running` (swap-in, admission, the batch). Returns the steps run, ``k + 1``."""
        k, cfg = len(free_after), self.config
        for i, (g, sample, tokens) in enumerate(seqs):
            if done[i] <= k:
                self.blocks.extend_within_block((g.rid, sample), tokens.out[bases[i] + done[i]:bases[i] + k + 1])
            tokens.truncate(lengths[i] + k)  # step k's token is sampled by the reference below
        self._advance(step, seqs, k, starts, ends)
        self.trace.steps_from(zip(starts[:k], ends, repeat(len(seqs)), repeat(0), repeat(0), repeat(len(self.running)),
                                  repeat(len(self.waiting)), repeat(0), free_after))
        self.step_id, self.extra_s, self.wasted = step + k, 0.0, 0
        self.batch_decode, self.batch_prefill = [(g, sample) for g, sample, _ in seqs], []
        self.tokens_left = cfg.max_num_batched_tokens - len(seqs)
        self.seqs_left = cfg.max_num_seqs - len(seqs)
        for g, sample, _ in seqs:
            g.slotted.add(sample)
        self._swap_in()
        self._admit()
        self._execute()
        return k + 1

    def _span_clock(self, width: int, lengths: list[int], span: int, next_arrival: float | None) -> tuple[list, list]:
        """Start and end times of up to ``span`` decode steps of ``width`` sequences of ``lengths`` tokens at the
        first, one token longer each step; the steps stop before one that would start at or after
        ``next_arrival``. Times are computed in chunks of doubling size, since the arrival often comes soon."""
        starts, ends, now = [], [], self.now
        while len(starts) < span:
            done = len(starts)
            count = min(span - done, max(SPAN_CHUNK, done))
            context = sum(lengths)
            attended = [context + width * k for k in range(done, done + count)]
            kv_read = self.cost.kv_bytes_read_steps([n + done for n in lengths], count)
            for seconds in self.cost.step_times(width, attended, kv_read):
                if starts and next_arrival is not None and now >= next_arrival:
                    return starts, ends
                starts.append(now)
                now += seconds
                ends.append(now)
        return starts, ends

    def _fingerprint(self) -> tuple:
        def seqs(g):
            return (g.rid, tuple(sorted(g.generated.items())), tuple(sorted(g.computed.items())),
                    tuple(sorted(g.slotted)))

        return (tuple(seqs(g) for g in self.running), tuple(seqs(g) for g in self.waiting),
                tuple(seqs(g) for g in self.swapped), self.blocks.fingerprint())


def simulate(requests: list[Request], model="llama-2-7b", hardware="h100-sxm", num_blocks: int = 2048,
             block_size: int = 16, config: SchedulerConfig | None = None, **kwargs) -> Trace:
    """Run ``requests`` through a :class:`Scheduler` (see it for the arguments) and return the trace."""
    return Scheduler(model, hardware, num_blocks, block_size, config, **kwargs).run(requests)
