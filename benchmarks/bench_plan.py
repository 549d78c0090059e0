"""Speed of ``ringlab plan train``'s search, as a ratio against brute force measured in the same run.

The peer is brute force over the same space (:func:`ringlab.plan.train.brute_force`: ``train_plan`` of every
configuration), on a job small enough to finish: Llama-3-8B on 64 H100s. Both return the same ranking (checked
here and in tests/plan). Then the whole search for Llama 3 405B on 16,384 H100s (seq 8,192, 2,048 sequences), whose
brute force would take tens of minutes, with the number of configurations, those ``train_plan`` evaluated and
the pruning counts. CPU seconds (``time.process_time``) are printed: on a machine shared with other work, wall
time says more about the neighbours. Nothing here asserts a time.

Usage: python benchmarks/bench_plan.py [--skip-large]
"""

from __future__ import annotations

import argparse
import time

from ringlab.plan.space import TrainJob
from ringlab.plan.train import brute_force, plan_train


def _cpu(fn):
    start = time.process_time()
    out = fn()
    return time.process_time() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-large", action="store_true", help="leave out the 16,384-GPU search")
    args = parser.parse_args()
    small = TrainJob("llama-3-8b", 64, "dgx-h100", 4096, 256)
    t_search, search = _cpu(lambda: plan_train(small, top=10))
    t_brute, truth = _cpu(lambda: brute_force(small, top=10))
    same = [r.step_seconds for r in search.layouts] == [r.step_seconds for r in truth]
    print(f"llama-3-8b on 64 GPUs: {search.configurations:,} configurations; search evaluated {search.evaluated:,} in "
          f"{t_search:.2f} CPU s, brute force all of them in {t_brute:.2f} CPU s: {t_brute / t_search:.1f}x; "
          f"same top 10: {same}")
    if args.skip_large:
        return
    big = TrainJob("llama-3.1-405b", 16384, "dgx-h100", 8192, 2048)
    t_big, result = _cpu(lambda: plan_train(big, top=10))
    print(f"llama-3.1-405b on 16,384 GPUs: {result.configurations:,} configurations, {result.evaluated:,} evaluated, "
          f"{t_big:.1f} CPU s ({t_big / result.evaluated * 1e3:.0f} ms per train_plan call and its share of the floors)")
    for title, counts in (("shapes refused", result.refused.shapes), ("configurations refused",
                                                                      result.refused.configurations),
                          ("configurations pruned", result.pruned)):
        print(f"  {title}: " + "; ".join(f"{k} {v:,}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
