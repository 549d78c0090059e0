"""Stand-in for ``nvidia-smi`` that replays a script of answers, one per call.

FAKE_SMI_SCRIPT names a JSON list of steps ``{"stdout": str, "stderr": str, "rc": int,
"sleep": seconds}`` (all optional); call k (from 0) plays step k, and calls past the end
replay the last step. FAKE_SMI_CALLS names a file that gets one JSON line per call,
``{"argv": [...], "pid": int}``; its length is the call counter, so the state survives
between processes. ``sleep`` before answering simulates a slow or hanging driver.
"""

import json
import os
import sys
import time


def main() -> int:
    with open(os.environ["FAKE_SMI_SCRIPT"]) as f:
        script = json.load(f)
    calls_path = os.environ["FAKE_SMI_CALLS"]
    with open(calls_path, "a") as f:
        f.write(json.dumps({"argv": sys.argv[1:], "pid": os.getpid()}) + "\n")
    with open(calls_path) as f:
        call = sum(1 for _ in f) - 1
    step = script[min(call, len(script) - 1)]
    time.sleep(step.get("sleep", 0))
    sys.stdout.write(step.get("stdout", ""))
    sys.stderr.write(step.get("stderr", ""))
    return step.get("rc", 0)


if __name__ == "__main__":
    sys.exit(main())
