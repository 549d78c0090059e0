"""Speed of the serving scheduler's fast path on trace-sized runs: a ratio against its reference, and an hour.

Two measurements, both printed, nothing asserted about time. Times are this process's CPU seconds
(``time.process_time``), which a machine shared with other jobs inflates far less than wall time.

1. **Fast path against the reference**, in the same run: one ~2,000-request Poisson trace (exponential lengths
   with the Azure conversation trace's means, below) through ``Scheduler(fast=True)`` and ``Scheduler(fast=False)``
   (the step-by-step reference); the ratio is reference / fast, and the two traces are checked equal (per-request
   records, events and step rows), so the speed is not bought with a different answer.
2. **An Azure-conversation-shaped hour** through the fast path alone: 19,440 requests at 5.4/s (Poisson), prompt
   and output lengths exponential with means 1,200 and 230 tokens, the shape of Azure's public LLM inference
   trace of conversations (Azure/AzurePublicDataset, ``AzureLLMInferenceTrace_conv``, 2023: about 19k requests in
   an hour, mean context ~1.2k tokens, mean generated ~230). Prompts are :class:`~ringlab.serving.HashedPrompt`
   with unique ids (no two share a block), so the trace holds a few ints per prompt, not a million token ids.

Both use Llama-3.1-8B on one H100-SXM (a 128k context: no request of either trace is too long for it; Llama-2-7B's
4,096 would reject 8% of Azure's conversations) with the pool ``ringlab serve-sim`` sizes by default (26,674 blocks of 16) and
vLLM's default token budget of 2,048 with chunked prefill (so no prompt is refused for its length).

3. **A real trace file** (``--trace FILE``, e.g. the whole ``AzureLLMInferenceTrace_conv.csv``, 19,366 requests, or
   Mooncake's ``conversation_trace.jsonl``, 12,031; neither ships with ringlab) through the fast path, as
   ``ringlab serve-sim --trace FILE --model llama-3.1-8b --chunked-prefill`` replays it, with the process's peak resident memory: a
   waiting request holds its :class:`~ringlab.serving.HashedPrompt`, not a token list, so the peak follows the
   requests in the engine, not the trace's tokens.

A trace's time is followed by a calibration loop's (20 million Python additions, :func:`_calibration`): on a
shared machine the same replay's CPU time varies with the host's load, and the loop shows by how much.

Usage: python benchmarks/serving_replay.py [--requests 2000] [--hour-rate 5.4] [--hour-seconds 3600] [--skip-hour]
       [--trace FILE [--trace-limit N]]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from ringlab.calc import kv_cache_bytes_per_token, max_cached_tokens
from ringlab.serving import Request, SchedulerConfig
from ringlab.serving.blocks import pool_blocks
from ringlab.serving.requests import HashedPrompt
from ringlab.serving.scheduler import Scheduler
from ringlab.serving.traces import load_trace, trace_requests

MODEL, HARDWARE = "llama-3.1-8b", "h100-sxm"
PROMPT_MEAN, OUTPUT_MEAN = 1200, 230  # Azure conversation trace's means (module docstring)
CONFIG = SchedulerConfig(max_num_batched_tokens=2048, chunked_prefill=True)


def _pool() -> int:
    """Blocks of 16 tokens next to the weights, as ``ringlab serve-sim`` sizes its default pool."""
    tokens = max_cached_tokens(MODEL, HARDWARE, "bf16")
    return pool_blocks(tokens * kv_cache_bytes_per_token(MODEL, "bf16"), MODEL, 16, "bf16")


def azure_shaped(count: int, rate: float, seed: int = 0) -> list[Request]:
    """``count`` requests with Poisson arrivals at ``rate``/s and exponential lengths of the Azure conversation
    means, each prompt a :class:`HashedPrompt` of its own ids."""
    rng = np.random.default_rng(seed)
    arrivals = np.concatenate([[0.0], np.cumsum(rng.exponential(1.0 / rate, size=count - 1))])
    prompts = np.maximum(np.ceil(rng.exponential(PROMPT_MEAN, size=count)), 1).astype(int)
    outputs = np.maximum(np.ceil(rng.exponential(OUTPUT_MEAN, size=count)), 1).astype(int)
    out, next_id, block = [], 0, 512
    for i in range(count):
        blocks = -(-int(prompts[i]) // block)
        out.append(Request(i, float(arrivals[i]), HashedPrompt(int(prompts[i]), range(next_id, next_id + blocks), block),
                           int(outputs[i])))
        next_id += blocks
    return out


def _timed(requests, fast: bool, blocks: int):
    start = time.process_time()
    trace = Scheduler(MODEL, HARDWARE, blocks, 16, CONFIG, fast=fast).run(requests)
    return time.process_time() - start, trace


def _same(a, b) -> bool:
    return (a.requests == b.requests and a.events == b.events
            and all(np.array_equal(a.steps[k], b.steps[k]) for k in a.steps))


def _calibration() -> float:
    """CPU seconds of a plain Python loop of 20 million additions: printed beside a trace's time, since a shared
    machine's speed varies with its host's load. Compare replay times only across similar calibrations."""
    start, total = time.process_time(), 0
    for i in range(20_000_000):
        total += i
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--hour-rate", type=float, default=5.4)
    parser.add_argument("--hour-seconds", type=float, default=3600.0)
    parser.add_argument("--skip-hour", action="store_true")
    parser.add_argument("--trace", help="replay this trace file instead (Azure CSV or Mooncake JSONL)")
    parser.add_argument("--trace-limit", type=int, help="its first N requests only")
    args = parser.parse_args()
    blocks = _pool()
    if args.trace:
        records = load_trace(args.trace, limit=args.trace_limit)
        seconds, trace = _timed(trace_requests(records), True, blocks)
        m = trace.metrics()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10  # Linux: KiB
        print(f"{args.trace}: {m['requests']:,} requests, {m['steps']:,} steps, {m['simulated_s']:,.0f} s simulated, "
              f"{m['finished']:,} finished")
        print(f"fast path               {seconds:8.2f} s CPU   peak resident {peak:,.0f} MiB")
        print(f"calibration loop        {_calibration():8.2f} s CPU   (module docstring: compare like with like)")
        return
    requests = azure_shaped(args.requests, 4.0)
    reference_s, reference = _timed(requests, False, blocks)
    fast_s, fast = _timed(requests, True, blocks)
    m = fast.metrics()
    print(f"{m['requests']:,} requests at 4/s, {m['steps']:,} steps, {m['finished']:,} finished ({blocks:,} blocks)")
    print(f"reference (fast=False)  {reference_s:8.2f} s CPU")
    print(f"fast path (fast=True)   {fast_s:8.2f} s CPU   same trace: {_same(fast, reference)}")
    print(f"ratio reference / fast  {reference_s / fast_s:8.1f}")
    if args.skip_hour:
        return
    count = int(args.hour_rate * args.hour_seconds)
    hour = azure_shaped(count, args.hour_rate, seed=1)
    hour_s, trace = _timed(hour, True, blocks)
    m = trace.metrics()
    print(f"Azure-shaped hour: {m['requests']:,} requests at {args.hour_rate}/s, {m['steps']:,} steps, "
          f"{m['simulated_s']:,.0f} s simulated, {m['finished']:,} finished")
    print(f"fast path               {hour_s:8.2f} s CPU")


if __name__ == "__main__":
    main()
