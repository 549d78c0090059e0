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
rejected on arrival: a prompt longer than the token budget
without chunked prefill, or (fixed policy) a request whose worst case, ``n x blocks(prompt +
max_new_tokens - 1)`` with nothing shared, exceeds the pool less the watermark.

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
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field

from ringlab.validation import check_number
from ringlab.validation import positive_int
from ringlab.serving.blocks import BlockManager, OutOfBlocksError, cache_layout
from ringlab.serving.cost import StepCost, host_link
from ringlab.serving.requests import Request, sampled_token
from ringlab.serving.trace import Trace

PREEMPTION_MODES = ("recompute", "swap")


MAX_BATCHED_TOKENS = 1 << 20  # tokens per step: the step-time table holds a few arrays this long


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
    ``max_steps``: a guard that stops the run.
    """

    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 256
    chunked_prefill: bool = False
    preemption: str = "recompute"
    reserve_decode: bool = True
    watermark: float = 0.01
    swap_bandwidth: float | None = None
    max_steps: int = 1_000_000

    def __post_init__(self):
        if positive_int(self.max_num_batched_tokens, "max_num_batched_tokens") > MAX_BATCHED_TOKENS:
            raise ValueError(f"max_num_batched_tokens={self.max_num_batched_tokens:,} is above {MAX_BATCHED_TOKENS:,}: "
                             "step times are tabulated per batch size up front (vLLM's defaults are 2,048 to 16,384)")
        positive_int(self.max_num_seqs, "max_num_seqs")
        positive_int(self.max_steps, "max_steps")
        for name in ("chunked_prefill", "reserve_decode"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")
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


@dataclass(eq=False)
class _Group:
    """A request in the engine. Per live sample: token ids (prompt + generated), tokens generated, and
    while prefilling the tokens with KV; ``slotted``: samples whose last token already has its slot."""

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
    ``check_invariants=True`` checks the allocator's books after every step (tests).
    Raises ValueError/TypeError for bad arguments.
    """

    def __init__(self, model, hardware, num_blocks: int, block_size: int = 16,
                 config: SchedulerConfig | None = None, enable_prefix_caching: bool = True,
                 dtype: str = "bf16", check_invariants: bool = False, tp: int = 1):
        self.config = config if config is not None else SchedulerConfig()
        if not isinstance(self.config, SchedulerConfig):
            raise TypeError(f"config must be a SchedulerConfig, got {type(config).__name__}")
        num_blocks = positive_int(num_blocks, "num_blocks")
        watermark = int(self.config.watermark * num_blocks)
        self.cost = StepCost(model, hardware, self.config.max_num_batched_tokens, dtype=dtype, tp=tp)
        self.layout = cache_layout(self.cost.model, block_size, dtype)
        self.blocks = BlockManager(num_blocks, block_size, watermark,
                                   enable_prefix_caching and self.layout.window is None, self.layout.window)
        self.block_bytes = self.layout.block_bytes
        self.swap_bandwidth = host_link(self.cost.hardware, self.config.swap_bandwidth,
                                        needed=self.config.preemption == "swap")
        self.check = check_invariants

    # ---- the run -----------------------------------------------------------------------------
    def run(self, requests: list[Request]) -> Trace:
        """Serve every request; stop when all are done, on a detected livelock, or at ``max_steps`` (then the
        trace's ``truncated`` says so and why: the run is partial)."""
        pending = deque(sorted(requests, key=lambda r: (r.arrival_s, r.request_id)))
        if len({r.request_id for r in pending}) != len(pending):
            raise ValueError("request ids must be unique")
        self.trace = Trace(self.blocks.num_blocks, self.blocks.block_size)
        self.waiting: deque[_Group] = deque()
        self.running: list[_Group] = []  # kept oldest first
        self.swapped: deque[_Group] = deque()
        self.groups: dict[int, _Group] = {}
        self.now, seen, progress, self.outputs = 0.0, {}, 0, 0
        while True:
            while pending and pending[0].arrival_s <= self.now:
                self._arrive(pending.popleft())
            if not (self.waiting or self.running or self.swapped):
                if not pending:
                    break
                self.now = pending[0].arrival_s
                continue
            step = self.trace.num_steps
            if step == self.config.max_steps:
                self.trace.event(step, self.now, "step limit", None, f"stopped after max_steps={step}")
                left = len(pending) + len(self.waiting) + len(self.running) + len(self.swapped)
                self.trace.truncated = (f"stopped at max_steps={step:,} with {left:,} request(s) not done; "
                                        "the numbers cover the simulated part only")
                break
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
        group = _Group(request, tokens={0: list(request.prompt)}, generated={0: 0})
        self.groups[request.request_id] = group
        self.trace.event(None, self.now, "arrive", request.request_id, f"prompt {len(request.prompt)}, "
                         f"output {request.max_new_tokens}, n {request.n}")
        reason = self._never_fits(request)
        if reason:
            group.finish_s = self.now
            self.trace.reject(request.request_id, reason)
            self.trace.event(None, self.now, "reject", request.request_id, reason)
            return
        self.waiting.append(group)

    def _never_fits(self, request: Request) -> str:
        cfg = self.config
        if not cfg.chunked_prefill and len(request.prompt) > cfg.max_num_batched_tokens:
            return (f"prompt of {len(request.prompt)} tokens exceeds max_num_batched_tokens="
                    f"{cfg.max_num_batched_tokens} without chunked prefill")
        if request.n > cfg.max_num_seqs:
            return f"its {request.n} samples exceed max_num_seqs={cfg.max_num_seqs}"
        room = self.blocks.usable_blocks
        prompt = self.layout.blocks(len(request.prompt)) + (request.n - 1) * self._extra(len(request.prompt))
        if self.blocks.never_fits(prompt):
            return f"prompt needs {prompt} blocks; the pool has {room} above the watermark"
        if cfg.reserve_decode:
            worst = request.n * self.layout.blocks(len(request.prompt) + request.max_new_tokens - 1)
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
                self.blocks.append_token(seq, group.tokens[sample][-1])
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
        return self.blocks.blocks_needed(token_lists) + reserve <= self.blocks.admission_room

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
        cfg = self.config
        while self.waiting:
            group = self.waiting[0]
            lists = list(group.tokens.values())
            reserve = self._held_on_admission(group, lists) + (self._decode_room(group) if cfg.reserve_decode else 0)
            if self.seqs_left < len(lists) or self.tokens_left < 1 or not self._room(lists, reserve):
                return
            uncached = sum(len(t) - min(self.blocks.cached_tokens(t), len(t) - 1) for t in lists)
            resumed = group.first_token_s is not None  # recomputing prompt + output: chunked whatever the config
            if not (cfg.chunked_prefill or resumed) and uncached > self.tokens_left:
                return
            self.waiting.popleft()
            fresh = group.first_token_s is None
            for sample, tokens in group.tokens.items():
                hits = self.blocks.prefix_cache_hits
                self.blocks.allocate((group.rid, sample), tokens)
                self.blocks.hold((group.rid, sample), (group.request.n if fresh else 1) * self._extra(len(tokens)))
                cached = (self.blocks.prefix_cache_hits - hits) * self.blocks.block_size
                group.computed[sample] = min(cached, len(tokens) - 1)  # the last token is always computed
            if group.first_scheduled_s is None:
                group.first_scheduled_s = self.now
            bisect.insort(self.running, group, key=lambda g: g.age)
            self.trace.event(self.step_id, self.now, "admit", group.rid,
                             f"{sum(len(t) for t in lists)} tokens, {sum(group.computed.values())} cached")
            self._schedule_prefill(group)
            self.seqs_left -= len(lists)

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
                group.tokens[child], group.generated[child] = list(group.tokens[0]), 0
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
