"""What a scheduler run leaves behind: an event log, one row per step, and per-request latencies.

Per request (seconds): **queueing delay** = first admitted - arrival; **TTFT** (time to first token)
= first token - arrival; **TPOT** (time per output token) = (finish - first token) / (tokens per
sample - 1), for requests of at least two tokens; **latency** = finish - arrival. Throughput is
output tokens (all samples) per second of simulated time from the first arrival to the last finish.
Percentiles are numpy's linear interpolation over the finished requests.

**Goodput** under an SLA (:meth:`Trace.metrics` with ``sla_ttft`` and/or ``sla_tpot``, seconds): a request
*meets the SLA* when it finished, its TTFT <= ``sla_ttft`` and its TPOT <= ``sla_tpot`` (a request of one
output token has no TPOT and meets that limit vacuously); a rejected or unfinished request misses it
(requests that had not arrived when a truncated run stopped are in the trace as unfinished).
Goodput = requests meeting the SLA / simulated span (the span of the throughput, first arrival to the end
of the run), in requests per second; attainment = the fraction of *all* requests that meet a limit. This is
the per-run "request goodput" of vLLM's serving benchmark (``vllm/benchmarks/serve.py``, ``--goodput
ttft:500 tpot:50``: completions within every limit, a limit met at equality, over the run's duration); DistServe
(Zhong et al., OSDI 2024, arXiv:2401.09670) introduced goodput for LLM serving as the highest request
rate served with a target fraction of requests within both limits, which
:func:`ringlab.serving.goodput.find_rate` searches for.

**Prefix-cache hit rate** = hit blocks / full prompt blocks looked up. The allocator counts a hit for
every full block it finds by key at each allocation: a first admission (the prompt of sample 0: its
``prompt_tokens // block_size`` full blocks), but also a re-admission after a recompute preemption
(prompt + output so far) and a swap-in. The trace knows the lookups of first admissions only, so the
rate is given when no request was preempted, else None (and None with prefix caching off).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain

import numpy as np

from ringlab.validation import check_real

STEP_FIELDS = ("start_s", "end_s", "decode_tokens", "prefill_tokens", "wasted_tokens", "running", "waiting",
               "swapped", "free_blocks")


@dataclass(frozen=True)
class Event:
    """One line of the log: ``step`` (None outside a step), time in seconds, ``kind`` (arrive, reject,
    admit, preempt, swap in, finish, livelock, step limit), request id (or None) and a detail."""

    step: int | None
    time_s: float
    kind: str
    request_id: int | None
    detail: str

    def __str__(self) -> str:
        step = "" if self.step is None else f"step {self.step}"
        who = "" if self.request_id is None else f"request {self.request_id}"
        return f"{step:>10} {self.time_s * 1e3:10.3f} ms  {self.kind:<10} {who:<12} {self.detail}"


class Trace:
    """Filled by :class:`~ringlab.serving.scheduler.Scheduler`; read its attributes and :meth:`metrics`.

    ``events``: list of :class:`Event`; ``steps``: dict of numpy arrays, one entry per step, keys
    :data:`STEP_FIELDS`; ``requests``: one dict per request (id, arrival_s, status, queueing_s,
    ttft_s, tpot_s, latency_s, output_tokens, preemptions); ``livelock``: None, or the (first, repeat)
    step numbers of the state that came back; ``truncated``: None, or why the run stopped early (the
    step cap), in which case every number describes a partial run; counters ``preemptions`` (by mode), ``preempted_blocks``,
    ``prefix_cache_hits``, ``copies``, ``rejected``; ``prefix_cache_lookups``: full prompt blocks looked up
    at first admissions, None when the hit rate is not derivable (module docstring).
    """

    def __init__(self, num_blocks: int, block_size: int):
        self.num_blocks, self.block_size = num_blocks, block_size
        self.events: list[Event] = []
        # the step rows end to end while the run goes (72 bytes a step: a run can take millions); None once
        # :meth:`finish` has made them :attr:`steps`
        self._flat: array | None = array("d")
        self.livelock: tuple[int, int] | None = None
        self.truncated: str | None = None  # why the run stopped before serving every request (max_steps)
        self.preemptions = {"recompute": 0, "swap": 0}
        self.preempted_blocks = 0
        self.rejected: dict[int, str] = {}
        self.requests: list[dict] = []
        self.steps: dict[str, np.ndarray] = {}
        self.prefix_cache_hits = self.copies = 0
        self.prefix_cache_lookups: int | None = None
        self.end_s = 0.0

    def event(self, step, time_s, kind, request_id, detail) -> None:
        """Append one :class:`Event` to the log."""
        self.events.append(Event(step, float(time_s), kind, request_id, detail))

    def reject(self, request_id: int, reason: str) -> None:
        """Record that a request was refused on arrival, and why."""
        self.rejected[request_id] = reason

    def preempt(self, mode: str, blocks: int) -> None:
        """Count one preemption (``recompute`` or ``swap``) that released ``blocks`` distinct blocks."""
        self.preemptions[mode] += 1
        self.preempted_blocks += blocks

    def step(self, *row) -> None:
        """Append one step's row, its values in the order of :data:`STEP_FIELDS`."""
        self._flat.extend(row)

    def steps_from(self, rows: Iterable[tuple]) -> None:
        """Append several steps' rows (each as :meth:`step` takes one), in step order."""
        self._flat.extend(chain.from_iterable(rows))

    @classmethod
    def combined(cls, requests: list[dict], parts: list[Trace]) -> Trace:
        """One trace for several instances that served one workload (:mod:`ringlab.serving.disagg`): ``requests``
        are the per-request rows as the system saw them (the :attr:`requests` keys), ``parts`` the instances'
        finished traces. Their events and steps are merged in time order, counters are summed, and the pool is
        the parts' pools together; the run is truncated, or livelocked, when a part is (the first one's reason).
        The prefix-cache lookups are summed when each request was served by one part (colocated instances); else
        (a disaggregated request is looked up on two instances) the hit rate is None."""
        first = parts[0] if parts else None
        out = cls(sum(p.num_blocks for p in parts), first.block_size if first else 1)
        out.requests = list(requests)
        if parts:  # the parts' steps in time order (a stable sort: ties keep the parts' order)
            order = np.argsort(np.concatenate([p.steps["start_s"] for p in parts]), kind="stable")
            out.steps = {name: np.concatenate([p.steps[name] for p in parts])[order] for name in STEP_FIELDS}
            out._flat = None
        out.events = sorted((e for p in parts for e in p.events), key=lambda e: e.time_s)
        for p in parts:
            for mode, count in p.preemptions.items():
                out.preemptions[mode] += count
            out.preempted_blocks += p.preempted_blocks
            out.rejected.update(p.rejected)
            out.prefix_cache_hits += p.prefix_cache_hits
            out.copies += p.copies
        out.end_s = max((p.end_s for p in parts), default=0.0)
        # a part that stopped early or cycled makes the whole run so (a goodput search must not count it as met)
        cut = [(i, p.truncated) for i, p in enumerate(parts) if p.truncated]
        if cut:
            out.truncated = f"instance {cut[0][0]} of {len(parts)}: {cut[0][1]}"
        out.livelock = next((p.livelock for p in parts if p.livelock), None)
        lookups = [p.prefix_cache_lookups for p in parts]
        if parts and None not in lookups and sum(len(p.requests) for p in parts) == len(out.requests):
            out.prefix_cache_lookups = sum(lookups)
        return out

    def finish(self, groups: list, blocks, end_s: float) -> None:
        """Freeze the log: step arrays, per-request rows and the allocator's counters."""
        # one float table (a view of the rows), then typed columns (copies, so the view goes): the counts are
        # far below 2**53, so exact in a float
        table = np.frombuffer(self._flat, dtype=float).reshape(self.num_steps, len(STEP_FIELDS))
        self.steps = {name: table[:, j].astype(float if name.endswith("_s") else np.int64)
                      for j, name in enumerate(STEP_FIELDS)}
        del table
        self._flat = None  # the rows live on in the columns only: a run of millions of steps holds them once
        self.prefix_cache_hits, self.copies, self.end_s = blocks.prefix_cache_hits, blocks.copies, end_s
        for g in sorted(groups, key=lambda g: g.rid):
            r = g.request
            status = ("rejected" if r.request_id in self.rejected else
                      "finished" if g.finish_s is not None else "unfinished")
            done = status == "finished"
            self.requests.append(dict(
                request_id=r.request_id, arrival_s=r.arrival_s, status=status,
                prompt_tokens=len(r.prompt), output_tokens=g.output_tokens, n=r.n, preemptions=g.preemptions,
                queueing_s=None if g.first_scheduled_s is None else g.first_scheduled_s - r.arrival_s,
                ttft_s=None if g.first_token_s is None else g.first_token_s - r.arrival_s,
                tpot_s=(g.finish_s - g.first_token_s) / (r.max_new_tokens - 1)
                if done and r.max_new_tokens > 1 else None,
                latency_s=g.finish_s - r.arrival_s if done else None,
            ))
        if blocks.enable_prefix_caching and not any(g.preemptions for g in groups):
            self.prefix_cache_lookups = sum(r["prompt_tokens"] // blocks.block_size for r in self.requests
                                            if r["queueing_s"] is not None)  # admitted: allocated once

    @property
    def num_steps(self) -> int:
        return len(self.steps["start_s"]) if self._flat is None else len(self._flat) // len(STEP_FIELDS)

    def count(self, status: str) -> int:
        """Requests with ``status`` (finished, unfinished or rejected)."""
        return sum(r["status"] == status for r in self.requests)

    def meets_sla(self, sla_ttft: float | None = None, sla_tpot: float | None = None) -> list[tuple[bool, bool]]:
        """Per request (in :attr:`requests` order): whether it meets ``sla_ttft`` and whether it meets ``sla_tpot``
        (seconds; None: no limit, always met), by the rules of the module docstring. Raises ValueError naming the
        limit outside 1 us .. 1 h (:data:`SLA_RANGE_S`)."""
        limits = [_limit(sla_ttft, "sla_ttft"), _limit(sla_tpot, "sla_tpot")]
        out = []
        for r in self.requests:
            done = r["status"] == "finished"
            out.append((done and r["ttft_s"] <= limits[0],
                        done and (r["tpot_s"] is None or r["tpot_s"] <= limits[1])))
        return out

    def metrics(self, sla_ttft: float | None = None, sla_tpot: float | None = None) -> dict:
        """Summary numbers (JSON-ready): counts, steps, simulated seconds, throughput, and mean / p50 /
        p99 of TTFT, TPOT, queueing delay and latency in seconds (None when no request qualifies);
        ``prefix_cache_hit_rate`` (None when not derivable, module docstring).

        With ``sla_ttft`` and/or ``sla_tpot`` (seconds) also: ``sla_ttft_s``, ``sla_tpot_s``, ``sla_met``
        (requests meeting every limit given), ``goodput_requests_per_s`` (those per simulated second, None for
        a zero span), ``sla_attainment`` (their fraction of all requests) and ``sla_ttft_attainment`` /
        ``sla_tpot_attainment`` (each limit alone; None for a limit not given). Raises ValueError naming a limit
        outside 1 us .. 1 h (:data:`SLA_RANGE_S`)."""
        finished = [r for r in self.requests if r["status"] == "finished"]
        first = min((r["arrival_s"] for r in self.requests), default=0.0)
        span = self.end_s - first
        out_tokens = sum(r["output_tokens"] for r in self.requests)
        out = dict(
            requests=len(self.requests), finished=len(finished), unfinished=self.count("unfinished"),
            rejected=self.count("rejected"), steps=self.num_steps, simulated_s=span,
            output_tokens=out_tokens, throughput_tokens_per_s=out_tokens / span if span > 0 else None,
            preemptions_recompute=self.preemptions["recompute"], preemptions_swap=self.preemptions["swap"],
            preempted_blocks=self.preempted_blocks, wasted_prefill_tokens=int(self.steps["wasted_tokens"].sum())
            if self.num_steps else 0,
            prefix_cache_hit_blocks=self.prefix_cache_hits, copy_on_write_copies=self.copies,
            prefix_cache_hit_rate=self.prefix_cache_hits / self.prefix_cache_lookups
            if self.prefix_cache_lookups else None,
            livelock=self.livelock is not None,
            truncated=self.truncated is not None, truncated_reason=self.truncated,
        )
        for name in ("ttft_s", "tpot_s", "queueing_s", "latency_s"):
            values = np.array([r[name] for r in finished if r[name] is not None], dtype=float)
            stem = name[:-2]
            for label, fn in (("mean", np.mean), ("p50", lambda v: np.percentile(v, 50)),
                              ("p99", lambda v: np.percentile(v, 99))):
                out[f"{stem}_{label}_s"] = float(fn(values)) if values.size else None
        if sla_ttft is not None or sla_tpot is not None:
            meets = self.meets_sla(sla_ttft, sla_tpot)
            total = len(meets)
            met = sum(a and b for a, b in meets)
            out.update(
                sla_ttft_s=sla_ttft, sla_tpot_s=sla_tpot, sla_met=met,
                goodput_requests_per_s=met / span if span > 0 else None,
                sla_attainment=met / total if total else None,
                sla_ttft_attainment=sum(a for a, _ in meets) / total if total and sla_ttft is not None else None,
                sla_tpot_attainment=sum(b for _, b in meets) / total if total and sla_tpot is not None else None,
            )
        return out

    def summary(self, sla_ttft: float | None = None, sla_tpot: float | None = None) -> str:
        """The metrics as a few lines of text (times in ms); with SLAs (seconds), a line of goodput."""
        m = self.metrics(sla_ttft, sla_tpot)

        def ms(key):
            return "-" if m[key] is None else f"{m[key] * 1e3:,.1f}"

        lines = [
            f"{m['requests']} requests: {m['finished']} finished, {m['unfinished']} unfinished, "
            f"{m['rejected']} rejected; {m['steps']:,} steps, {m['simulated_s']:,.2f} s simulated",
            "throughput: " + ("-" if m["throughput_tokens_per_s"] is None else
                              f"{m['throughput_tokens_per_s']:,.0f} output tokens/s"),
            f"TTFT ms   mean {ms('ttft_mean_s')}  p50 {ms('ttft_p50_s')}  p99 {ms('ttft_p99_s')}",
            f"TPOT ms   mean {ms('tpot_mean_s')}  p50 {ms('tpot_p50_s')}  p99 {ms('tpot_p99_s')}",
            f"queue ms  mean {ms('queueing_mean_s')}  p50 {ms('queueing_p50_s')}  p99 {ms('queueing_p99_s')}",
            f"preemptions: {m['preemptions_recompute']} recompute, {m['preemptions_swap']} swap "
            f"({m['preempted_blocks']:,} blocks); prefix-cache hits {m['prefix_cache_hit_blocks']:,} blocks; "
            f"copy-on-write copies {m['copy_on_write_copies']:,}"
            + ("" if m["prefix_cache_hit_rate"] is None else f"; hit rate {m['prefix_cache_hit_rate']:.1%}"),
        ]
        if "sla_met" in m:
            limits = " and ".join(f"{name} <= {limit * 1e3:g} ms" for name, limit in
                                  (("TTFT", sla_ttft), ("TPOT", sla_tpot)) if limit is not None)
            lines.append(f"SLA {limits}: {m['sla_met']:,} of {m['requests']:,} requests meet it "
                         f"({_percent(m['sla_attainment'])}; TTFT alone {_percent(m['sla_ttft_attainment'])}, "
                         f"TPOT alone {_percent(m['sla_tpot_attainment'])}); goodput "
                         + ("-" if m["goodput_requests_per_s"] is None
                            else f"{m['goodput_requests_per_s']:,.2f} requests/s"))
        if self.rejected:
            first = min(self.rejected)
            others = len(self.rejected) - 1
            lines.append(f"rejected on arrival: request {first}: {self.rejected[first]}"
                         + (f" (and {others:,} other request{'s' if others > 1 else ''})" if others else ""))
        if self.livelock:
            lines.append(f"LIVELOCK: step {self.livelock[1]} repeats the state of step {self.livelock[0]}")
        if self.truncated:
            lines.append(f"TRUNCATED: {self.truncated}")
        return "\n".join(lines)


SLA_RANGE_S = (1e-6, 3600.0)  # an SLA limit outside 1 us .. 1 h is a unit mistake (the range plan_serve takes)


def _limit(value: float | None, name: str) -> float:
    """An SLA limit in seconds: ``inf`` for None; ValueError/TypeError naming ``name`` outside :data:`SLA_RANGE_S`."""
    if value is None:
        return np.inf
    return check_real(value, name, min=SLA_RANGE_S[0], max=SLA_RANGE_S[1])


def _percent(fraction: float | None) -> str:
    return "-" if fraction is None else f"{fraction:.1%}"
