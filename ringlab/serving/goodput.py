"""Goodput under a TTFT / TPOT SLA: the highest arrival rate a configuration serves, and the chunk-size trade-off.

DistServe (Zhong et al., OSDI 2024, arXiv:2401.09670) measures a serving system by its *goodput*: the
highest request rate it serves while a target fraction of the requests meets both a TTFT and a TPOT
limit. :func:`find_rate` searches for that rate with the simulator, the target being the p99s: a run
*meets the SLA* when its p99 TTFT and its p99 TPOT are within the limits and every request finished
(none rejected or left unfinished, no livelock, no truncated run); :func:`meets_p99` is that rule. The
per-run goodput of the requests themselves (requests meeting both limits per second) is
:meth:`ringlab.serving.Trace.metrics` with ``sla_ttft`` / ``sla_tpot``.

The rate is searched on one workload stretched in time (:func:`time_scaled`): the same requests (lengths,
prompts, order, relative gaps) arrive ``rate / base_rate`` times faster, so runs at different rates differ
only in load, the search is reproducible, and "meets" is close to monotone in the rate (not exactly:
a scheduler is not a monotone system). A fixed number of requests replayed faster arrives within a
shorter window ``W``, and a finite window hides a small overload. At an arrival rate ``(1 + e)`` times
the sustained one ``r``, the excess ``e r W`` requests first fill the batch, which holds about ``r x`` the
mean latency ``T`` requests (Little's law), and only then queue, adding to the TTFT; a run thus meets a
TTFT limit ``L`` while ``e`` is below about ``(T + L) / W``. The answer may exceed the sustained rate by
that fraction (a heuristic); the search says so when it exceeds the resolution (a burst that fits one
batch meets almost any rate), and a longer trace narrows it.

:func:`chunk_sweep` runs one workload at several chunk sizes of chunked prefill, the trade-off
Sarathi-Serve (Agrawal et al., OSDI 2024, arXiv:2403.02310) describes: larger chunks finish prompts in
fewer steps (lower TTFT) but make the steps that decodes share longer (higher TPOT).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ringlab.serving.requests import Request
from ringlab.serving.scheduler import SchedulerConfig, simulate
from ringlab.serving.trace import SLA_RANGE_S, Trace
from ringlab.validation import check_real, positive_int

MAX_SEARCH_RUNS = 200  # a bound on max_runs: a search is a few tens of scheduler runs


def meets_p99(metrics: dict, sla_ttft: float, sla_tpot: float) -> bool:
    """Whether a run's ``metrics`` (:meth:`~ringlab.serving.Trace.metrics`) meet the SLA: every request finished
    (none rejected or unfinished, no livelock or truncation), p99 TTFT <= ``sla_ttft`` and p99 TPOT <= ``sla_tpot``
    (seconds; a run whose requests all have one output token has no TPOT and meets that limit)."""
    if metrics["rejected"] or metrics["unfinished"] or metrics["livelock"] or metrics["truncated"] \
            or not metrics["finished"]:
        return False
    return metrics["ttft_p99_s"] <= sla_ttft and (metrics["tpot_p99_s"] is None or metrics["tpot_p99_s"] <= sla_tpot)


def time_scaled(requests: list[Request], base_rate: float | None = None) -> Callable[[float], list[Request]]:
    """A function ``rate -> requests`` that replays ``requests`` with every arrival time multiplied by
    ``base_rate / rate`` (same lengths, prompts and order; the load scales with ``rate``).

    ``base_rate``: the rate ``requests`` stand for, in requests per second, e.g. the ``rate`` they were
    drawn at by :func:`~ringlab.serving.poisson_requests`; default their mean rate, (count - 1) / (last
    arrival - first arrival). Raises ValueError for an empty list, or no default when every arrival is at
    the same time, and for a rate or base_rate that is not a finite number > 0.
    """
    requests = list(requests)
    if not requests:
        raise ValueError("requests: the workload is empty")
    if base_rate is None:
        arrivals = [r.arrival_s for r in requests]
        spread = max(arrivals) - min(arrivals)
        if spread <= 0:
            raise ValueError("requests: every arrival is at the same time, so they have no mean rate; give base_rate")
        base_rate = (len(requests) - 1) / spread
    base_rate = check_real(base_rate, "base_rate", min=0, min_open=True)

    def at(rate: float) -> list[Request]:
        factor = base_rate / check_real(rate, "rate", min=0, min_open=True)
        return [replace(r, arrival_s=r.arrival_s * factor) for r in requests]

    return at


@dataclass(frozen=True)
class RateProbe:
    """One scheduler run of the search: the ``rate`` (requests/s), the run's p99 TTFT and p99 TPOT (seconds,
    None when no request qualifies), whether it ``meets`` the SLA (:func:`meets_p99`), its per-request
    ``goodput`` (requests/s) and ``sla_attainment`` (fraction of requests within both limits), ``why``
    it misses (empty when it meets), ``arrival_window_s`` (first to last arrival) and ``latency_mean_s``."""

    rate: float
    ttft_p99_s: float | None
    tpot_p99_s: float | None
    meets: bool
    goodput: float | None
    sla_attainment: float | None
    why: str
    arrival_window_s: float
    latency_mean_s: float | None


@dataclass
class RateSearch:
    """What :func:`find_rate` found (rates in requests/s). ``bracket``: (the highest rate found to meet the SLA,
    the lowest found to fail above it), either None when the search found none; ``rate``: the bracket's low
    end, the answer; ``converged``: high / low <= 1 + ``resolution``; ``runs``: every :class:`RateProbe` in
    the order run; ``note``: why the search stopped short, and whether the trace was too short at the
    answer's rate to stand for a sustained load (module docstring); empty when neither."""

    sla_ttft: float
    sla_tpot: float
    resolution: float
    rate: float | None = None
    bracket: tuple[float | None, float | None] = (None, None)
    converged: bool = False
    runs: list[RateProbe] = field(default_factory=list)
    note: str = ""


def _probe(rate: float, requests: list[Request], trace: Trace, sla_ttft: float, sla_tpot: float) -> RateProbe:
    m = trace.metrics(sla_ttft, sla_tpot)
    arrivals = [r.arrival_s for r in requests]
    meets = meets_p99(m, sla_ttft, sla_tpot)
    why = []
    if not meets:
        for key, label in (("rejected", "rejected"), ("unfinished", "unfinished")):
            if m[key]:
                why.append(f"{m[key]:,} {label}")
        if m["livelock"] or m["truncated"]:
            why.append("livelock" if m["livelock"] else "truncated run")
        for key, limit, label in (("ttft_p99_s", sla_ttft, "TTFT"), ("tpot_p99_s", sla_tpot, "TPOT")):
            if m[key] is not None and m[key] > limit:
                why.append(f"p99 {label} {m[key] * 1e3:,.1f} ms > {limit * 1e3:g} ms")
    return RateProbe(rate, m["ttft_p99_s"], m["tpot_p99_s"], meets, m["goodput_requests_per_s"], m["sla_attainment"],
                     "; ".join(why) or ("no request finished" if not meets else ""),
                     max(arrivals, default=0.0) - min(arrivals, default=0.0), m["latency_mean_s"])


def find_rate(make_requests: Callable[[float], list[Request]], run: Callable[[list[Request]], Trace],
              sla_ttft: float, sla_tpot: float, start_rate: float = 1.0, resolution: float = 0.02,
              max_runs: int = 24, min_rate: float = 1e-3, max_rate: float = 1e4) -> RateSearch:
    """The highest arrival rate (requests/s) whose run meets the p99 SLA (:func:`meets_p99`), by bisection.

    ``make_requests(rate)``: the workload at that rate (:func:`time_scaled` of a Poisson trace or of a
    recorded one); ``run(requests)``: their :class:`~ringlab.serving.Trace` from a fresh
    :class:`~ringlab.serving.Scheduler` (one reused would start with the previous run's cached prefixes).
    ``sla_ttft`` / ``sla_tpot``: p99 limits in seconds (1 us .. 1 h).

    The search runs ``start_rate``; while it meets, doubles the rate, and while it fails, halves it (within
    ``[min_rate, max_rate]``), until a meeting rate ``low`` and a failing one ``high`` bracket the answer; then
    bisects geometrically (the midpoint sqrt(low x high)) until ``high / low <= 1 + resolution``, so the answer
    is within ``resolution`` (a fraction, default 2%) of the boundary. At most ``max_runs`` scheduler runs
    (doubling from 1 to 1e4 takes 14, bisecting a factor 2 to 2% six). The result says whether it converged
    and, if not, why (the rate limits or ``max_runs``), and when the trace is too short at the answer's rate to
    tell it from the sustained rate within ``resolution`` (module docstring). A request rejected on arrival is
    rejected at every rate (the engine refuses it for itself: its length against the context or the token
    budget, its blocks against the pool), so the search stops at the first run that rejects one: no rate meets.
    Raises ValueError/TypeError naming a bad argument.
    """
    sla_ttft = check_real(sla_ttft, "sla_ttft", min=SLA_RANGE_S[0], max=SLA_RANGE_S[1])
    sla_tpot = check_real(sla_tpot, "sla_tpot", min=SLA_RANGE_S[0], max=SLA_RANGE_S[1])
    resolution = check_real(resolution, "resolution", min=1e-4, max=1.0)
    if positive_int(max_runs, "max_runs") > MAX_SEARCH_RUNS:
        raise ValueError(f"max_runs must be at most {MAX_SEARCH_RUNS}, got {max_runs}")
    min_rate = check_real(min_rate, "min_rate", min=0, min_open=True)
    max_rate = check_real(max_rate, "max_rate", min=min_rate)
    start_rate = check_real(start_rate, "start_rate", min=min_rate, max=max_rate)
    search = RateSearch(sla_ttft, sla_tpot, resolution)
    refused = ""  # why some requests are rejected on arrival, at any rate

    def meets(rate: float) -> bool:
        nonlocal refused
        requests = make_requests(rate)
        trace = run(requests)
        search.runs.append(_probe(rate, requests, trace, sla_ttft, sla_tpot))
        if trace.rejected:
            first = min(trace.rejected)
            refused = (f"{len(trace.rejected):,} of {len(requests):,} requests are rejected on arrival at any rate "
                       f"(request {first}: {trace.rejected[first]})")
        return search.runs[-1].meets

    low = high = None
    rate = start_rate
    if meets(rate):
        low = rate
        while high is None and rate < max_rate and len(search.runs) < max_runs:
            rate = min(2 * rate, max_rate)
            low, high = (rate, None) if meets(rate) else (low, rate)
    else:
        high = rate
        while not refused and low is None and rate > min_rate and len(search.runs) < max_runs:
            rate = max(rate / 2, min_rate)
            low, high = (rate, high) if meets(rate) else (None, rate)
    while low is not None and high is not None and high / low > 1 + resolution and len(search.runs) < max_runs:
        mid = math.sqrt(low * high)
        low, high = (mid, high) if meets(mid) else (low, mid)
    search.bracket = (low, high)
    search.rate = low
    search.converged = low is not None and high is not None and high / low <= 1 + resolution
    if refused and low is None:
        search.note = f"no rate meets the SLA: {refused}"
    elif low is None:
        search.note = f"no rate down to {min(r.rate for r in search.runs):g}/s meets the SLA: {search.runs[-1].why}"
    elif high is None:
        search.note = (f"every rate tried meets the SLA, up to {low:g}/s"
                       + (" (max_rate)" if low >= max_rate else f"; stopped after max_runs={max_runs}"))
    elif not search.converged:
        search.note = f"stopped after max_runs={max_runs} with the bracket {low:g}..{high:g}/s"
    found = next((r for r in search.runs if r.rate == low), None)
    hidden = None if found is None else _hidden_overload(found, sla_ttft)
    if hidden is not None and hidden > resolution:
        search.note += (("; " if search.note else "") + f"at {low:g}/s the requests arrive within "
                        f"{found.arrival_window_s:.3g} s, too short to see an overload that the batch and the TTFT "
                        "limit absorb, so the sustained rate "
                        + ("is unknown (a burst)" if hidden >= 1 else f"may be up to {hidden:.0%} lower")
                        + "; a longer trace narrows it")
    return search


def _hidden_overload(probe: RateProbe, sla_ttft: float) -> float | None:
    """The overload a run at ``probe``'s rate may hide, as a fraction of the rate: (mean latency + TTFT limit) /
    arrival window (module docstring); inf for a zero window, None without a finished request."""
    if probe.latency_mean_s is None:
        return None
    if probe.arrival_window_s == 0:
        return math.inf
    return (probe.latency_mean_s + sla_ttft) / probe.arrival_window_s


def chunk_sweep(requests: list[Request], chunks, sla_ttft: float, sla_tpot: float, model="llama-2-7b",
                hardware="h100-sxm", num_blocks: int = 2048, block_size: int = 16,
                config: SchedulerConfig | None = None, **scheduler_kwargs) -> list[dict]:
    """Serve ``requests`` with chunked prefill at each chunk size (``max_num_batched_tokens``) in ``chunks``.

    ``config``: the other scheduler settings (default :class:`SchedulerConfig`); ``model``, ``hardware``,
    ``num_blocks``, ``block_size`` and ``scheduler_kwargs`` (``dtype``, ``tp``, ...) as for
    :func:`~ringlab.serving.simulate`. Returns one dict per chunk size, in the order given:
    ``max_num_batched_tokens``, ``ttft_p99_s``, ``tpot_p99_s`` (seconds), ``goodput_requests_per_s``,
    ``sla_attainment`` (per request, :meth:`~ringlab.serving.Trace.metrics`) and ``meets_p99``
    (:func:`meets_p99`). Raises ValueError/TypeError for an empty ``chunks`` or a bad size or limit.
    """
    chunks = [positive_int(c, "chunks") for c in chunks]
    if not chunks:
        raise ValueError("chunks: give at least one chunk size (max_num_batched_tokens)")
    base = config if config is not None else SchedulerConfig()
    rows = []
    for chunk in chunks:
        cfg = replace(base, max_num_batched_tokens=chunk, chunked_prefill=True)
        m = simulate(requests, model, hardware, num_blocks, block_size, cfg, **scheduler_kwargs).metrics(
            sla_ttft, sla_tpot)
        rows.append(dict(max_num_batched_tokens=chunk, ttft_p99_s=m["ttft_p99_s"], tpot_p99_s=m["tpot_p99_s"],
                         goodput_requests_per_s=m["goodput_requests_per_s"], sla_attainment=m["sla_attainment"],
                         meets_p99=meets_p99(m, sla_ttft, sla_tpot)))
    return rows
