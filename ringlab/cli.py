"""The ``ringlab`` command line: one subcommand per module in :mod:`ringlab.commands`.

Each subcommand module exposes ``main(argv: list[str]) -> int`` with its own argparse
parser, and is imported only when its subcommand runs, so ``ringlab --help`` stays fast
and needs neither torch nor matplotlib.
"""

from __future__ import annotations

import importlib
import os
import sys

from ringlab import __version__, textfmt

# name -> (module implementing it, one-line summary)
COMMANDS: dict[str, tuple[str, str]] = {
    "check": ("ringlab.commands.check", "grade your exercise files (ringlab check 01a, ringlab check kv_cache, ringlab check --all)"),
    "plan": ("ringlab.commands.plan", "search training layouts (plan train) or serving configurations (plan serve) for a job"),
    "practice": ("ringlab.commands.practice", "interview practice: a card, or timed sessions and mock interviews with numbers to compute"),
    "bench": ("ringlab.commands.bench", "bandwidth table, nccl-tests style: torch.distributed vs ringlab's ring"),
    "calc": ("ringlab.commands.calc", "capacity calculators: KV cache, gradient traffic, ... (ringlab calc --help)"),
    "cost": ("ringlab.commands.cost", "bytes per rank, steps and alpha-beta time of each collective algorithm"),
    "explain": ("ringlab.commands.explain", "read nccl-tests output / NCCL logs: what ran, what it should reach, findings"),
    "gpumon": ("ringlab.commands.gpumon", "append per-GPU utilization and memory to a CSV log (nvidia-smi or NVML)"),
    "shards": ("ringlab.commands.shards", "download a sharded checkpoint: write one, serve it with faults, fetch it (K, deadline, retries)"),
    "serve-sim": ("ringlab.commands.serve_sim", "simulate serving a request trace: paged KV blocks, continuous batching"),
    "topic": ("ringlab.commands.topic", "every file of a topic from its number: notebook, exercises, card, tests"),
    "verify": ("ringlab.commands.verify", "run a collective in the simulator and check results and bytes"),
}


def _usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = ["usage: ringlab <command> [options]   (ringlab --version)", "", "commands:"]
    lines += [textfmt.wrap(summary, f"  {name:<{width}}  ", first_line_only=True)
              for name, (_, summary) in sorted(COMMANDS.items())]
    lines += ["", "Run 'ringlab <command> --help' for the options of one command."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Dispatch ``argv`` (default ``sys.argv[1:]``) to a subcommand; return its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    if argv[0] == "--version":
        print(f"ringlab {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"ringlab: unknown command {name!r}; choose one of: {', '.join(sorted(COMMANDS))}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    try:
        return int(module.main(rest) or 0)
    except BrokenPipeError:  # `ringlab ... | head`: the reader left; not an error of ours
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(f"ringlab {name}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug of ours: one line, not a traceback (RINGLAB_TRACEBACK=1 shows it)
        if os.environ.get("RINGLAB_TRACEBACK") == "1":
            raise
        print(f"ringlab {name}: internal error: {type(exc).__name__}: {str(exc)[:500]} "
              "(a bug in ringlab: please report it; RINGLAB_TRACEBACK=1 shows the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
