"""19a's grader: the worked answer passes (in-process and in the sandbox), the untouched stub is not attempted,
every classic mistake has a mutant, and run_async reports the tasks a coroutine left running.

Each mutant (an edit of the worked answer, tests/mutant_edits.py EDITS "19a_*") is graded by
tests/check/graders/test_graders.py, which checks that it is rejected with the words of its EXPECT; here, that the
mutants cover every mistake the grader names.
"""

import asyncio
from pathlib import Path

import pytest

from ringlab.check import grade
from ringlab.check.aio import run_async
from ringlab.check.graders import shard_download
from ringlab.check.isolated import grade_isolated, time_limit

from mutant_edits import EDITS  # tests/ is on sys.path (rootdir-relative)

ROOT = Path(__file__).resolve().parents[3]

# the mistakes of issue 28's list, each with its mutant
MISTAKES = {
    "no limit (one task per shard)": "one_task_per_shard",
    "a semaphore not released on the error path": "permit_not_released",
    "only a connect timeout": "connect_timeout_only",
    "a per-request timeout taken for the deadline": "timeout_per_request",
    "a body never closed (connection leak)": "response_never_closed",
    "tasks still running after cancel": "tasks_left_running",
    "retrying 404/403": "retries_4xx",
    "retry without backoff": "no_backoff",
    "Retry-After ignored": "ignores_retry_after",
    "a partial file at the final path": "writes_final_path",
    "checksum not verified": "no_checksum",
    "resume from zero": "resume_from_zero",
    "the first error swallowed": "swallows_first_error",
}


def test_every_classic_mistake_has_a_mutant():
    mutants = {name.removeprefix("19a_") for name in EDITS if name.startswith("19a_")}
    assert set(MISTAKES.values()) <= mutants


def test_every_scenario_has_an_expected_outcome():
    cases = shard_download.download_cases()
    assert len(cases) > 10
    assert {c["scenario"] for c in cases} == set(shard_download._EXPECT)


@pytest.mark.slow
def test_worked_answer_passes_in_the_sandbox():
    result = grade_isolated("19a", ROOT / "solutions" / "19_shard_download.py")
    assert result.outcome == "graded" and result.status == "passed", str(result)
    assert result.seconds < time_limit("19a")


def test_untouched_stub_is_not_attempted_without_starting_anything():
    result = grade_isolated("19a", ROOT / "exercises" / "19_shard_download.py")
    assert result.status == "not attempted" and "19a" in result.message


def test_a_plain_function_is_told_to_be_async():
    result = grade("19a", lambda index_url, dest, **kwargs: [])
    assert result.status == "wrong" and "must be an async function" in result.message


def test_run_async_reports_tasks_left_running():
    async def leaves_one(n):
        asyncio.get_running_loop().create_task(asyncio.sleep(60), name="sleeper")
        return n * 2

    report = run_async(leaves_one, 21)
    assert report["value"] == 42 and report["error"] is None
    assert report["pending_count"] == 1 and report["pending"] == ["sleep"]


def test_run_async_reports_what_the_coroutine_raised_and_nothing_pending_after_a_task_group():
    async def fails():
        async with asyncio.TaskGroup() as group:
            group.create_task(asyncio.sleep(60))
            group.create_task(_raise_soon())

    report = run_async(fails)
    assert isinstance(report["error"], ExceptionGroup) and report["pending_count"] == 0


async def _raise_soon():
    await asyncio.sleep(0.01)
    raise ValueError("boom")


def test_run_async_passes_a_sandbox_report_through():
    made = run_async(lambda: _answer())
    assert run_async(lambda: made) == made


async def _answer():
    return 1


def test_run_async_reraises_system_exit():
    async def exits():
        raise SystemExit(3)

    with pytest.raises(SystemExit):
        run_async(exits)


def test_worked_answer_never_writes_outside_dest(tmp_path):
    """Regression: the index comes from the network; the worked answer joined its names onto dest unchecked,
    so '../x' wrote beside dest. It must refuse the index, naming it, and write nothing."""
    import importlib.util
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    spec = importlib.util.spec_from_file_location("solution_19", ROOT / "solutions" / "19_shard_download.py")
    solution = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(solution)

    class Hostile(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = (json.dumps({"weight_map": {"w": "../escaped.safetensors"}}).encode()
                    if self.path.endswith(".index.json") else b"x" * 16)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/model.safetensors.index.json"
        with pytest.raises(Exception, match=r"model\.safetensors\.index\.json: .*not a plain file name"):
            asyncio.run(solution.download_shards(url, str(tmp_path / "dest"), concurrency=2, timeout=10))
    finally:
        server.shutdown()
        server.server_close()
    assert not (tmp_path / "escaped.safetensors").exists()


@pytest.mark.parametrize("cdn_bytes, ok", [(b"the shard's bytes", True), (b"other bytes, same len", False)])
def test_worked_answer_follows_a_hub_redirect_and_checks_its_etag(cdn_bytes, ok, tmp_path):
    """Regression: the Hub answers a LFS file with a 302 to its CDN, X-Linked-Etag on the 302. The worked
    answer did not follow redirects ("HTTP 302"); it must, and check the bytes against the 302's header."""
    import hashlib
    import importlib.util
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    spec = importlib.util.spec_from_file_location("solution_19", ROOT / "solutions" / "19_shard_download.py")
    solution = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(solution)
    name = "model-00001-of-00001.safetensors"
    etag = hashlib.sha256(b"the shard's bytes").hexdigest()

    class Hub(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            if self.path.endswith(".index.json"):
                self.reply(200, b'{"weight_map": {"w": "%s"}}' % name.encode())
            elif self.path.startswith("/cdn/"):
                self.reply(200, cdn_bytes)
            else:
                self.reply(302, b"", {"Location": "/cdn/" + name, "X-Linked-Etag": f'"{etag}"'})

        def reply(self, status, body, headers=()):
            self.send_response(status)
            for key, value in dict(headers).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/repo/model.safetensors.index.json"
    try:
        run = solution.download_shards(url, str(tmp_path / "dest"), concurrency=2, timeout=10)
        if ok:
            assert asyncio.run(run) == [name]
            assert (tmp_path / "dest" / name).read_bytes() == cdn_bytes
        else:
            with pytest.raises(Exception, match="checksum mismatch"):
                asyncio.run(run)
            assert not (tmp_path / "dest" / name).exists()
    finally:
        server.shutdown()
        server.server_close()
