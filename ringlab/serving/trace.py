"""What a scheduler run leaves behind: an event log, one row per step, and per-request latencies.

Per request (seconds): **queueing delay** = first admitted - arrival; **TTFT** (time to first token)
= first token - arrival; **TPOT** (time per output token) = (finish - first token) / (tokens per
sample - 1), for requests of at least two tokens; **latency** = finish - arrival. Throughput is
output tokens (all samples) per second of simulated time from the first arrival to the last finish.
Percentiles are numpy's linear interpolation over the finished requests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
    ``prefix_cache_hits``, ``copies``, ``rejected``.
    """

    def __init__(self, num_blocks: int, block_size: int):
        self.num_blocks, self.block_size = num_blocks, block_size
        self.events: list[Event] = []
        self._rows: list[tuple] = []
        self.livelock: tuple[int, int] | None = None
        self.truncated: str | None = None  # why the run stopped before serving every request (max_steps)
        self.preemptions = {"recompute": 0, "swap": 0}
        self.preempted_blocks = 0
        self.rejected: dict[int, str] = {}
        self.requests: list[dict] = []
        self.steps: dict[str, np.ndarray] = {}
        self.prefix_cache_hits = self.copies = 0
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
        self._rows.append(row)

    def finish(self, groups: list, blocks, end_s: float) -> None:
        """Freeze the log: step arrays, per-request rows and the allocator's counters."""
        cols = list(zip(*self._rows)) if self._rows else [()] * len(STEP_FIELDS)
        self.steps = {name: np.array(col, dtype=float if name.endswith("_s") else np.int64)
                      for name, col in zip(STEP_FIELDS, cols)}
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

    @property
    def num_steps(self) -> int:
        return len(self._rows)

    def count(self, status: str) -> int:
        """Requests with ``status`` (finished, unfinished or rejected)."""
        return sum(r["status"] == status for r in self.requests)

    def metrics(self) -> dict:
        """Summary numbers (JSON-ready): counts, steps, simulated seconds, throughput, and mean / p50 /
        p99 of TTFT, TPOT, queueing delay and latency in seconds (None when no request qualifies)."""
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
            livelock=self.livelock is not None,
            truncated=self.truncated is not None, truncated_reason=self.truncated,
        )
        for name in ("ttft_s", "tpot_s", "queueing_s", "latency_s"):
            values = np.array([r[name] for r in finished if r[name] is not None], dtype=float)
            stem = name[:-2]
            for label, fn in (("mean", np.mean), ("p50", lambda v: np.percentile(v, 50)),
                              ("p99", lambda v: np.percentile(v, 99))):
                out[f"{stem}_{label}_s"] = float(fn(values)) if values.size else None
        return out

    def summary(self) -> str:
        """The metrics as a few lines of text (times in ms)."""
        m = self.metrics()

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
            f"copy-on-write copies {m['copy_on_write_copies']:,}",
        ]
        if self.rejected:
            reasons = sorted(set(self.rejected.values()))
            lines.append(f"rejected on arrival: {reasons[0]}" + (f" (and {len(reasons) - 1} other reasons)"
                                                                 if len(reasons) > 1 else ""))
        if self.livelock:
            lines.append(f"LIVELOCK: step {self.livelock[1]} repeats the state of step {self.livelock[0]}")
        if self.truncated:
            lines.append(f"TRUNCATED: {self.truncated}")
        return "\n".join(lines)
