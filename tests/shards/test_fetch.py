"""The reference fetcher against every fault of the shard server, judged from the server's records.

Timing is only ever checked from below (a Retry-After of 1 s means the retry came at least ~1 s later),
which a slower machine can only make truer; a hang ends at pytest-timeout, never at a timed assert.
"""

from __future__ import annotations

import asyncio
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shards_checks import assert_complete, assert_no_partial
from ringlab.shards import INDEX_NAME
from ringlab.shards.fetch import FetchOptions, fetch, fetch_checkpoint, linked_etag, parse_retry_after

QUICK = dict(backoff=0.01, backoff_max=0.05, seed=0)  # short waits: the tests check who waits, not how long


def run(server, dest, **options):
    report = fetch(server.index_url, dest, **{**QUICK, **options})
    assert server.wait_idle(5.0) == 0, "the fetcher left connections open"
    return report, server.records


def test_clean_download_is_complete_and_verified(serve, checkpoint, tmp_path):
    server = serve()
    report, records = run(server, tmp_path / "out", concurrency=3, timeout=30)
    assert report.ok and report.error is None
    assert_complete(tmp_path / "out", checkpoint)
    assert all(s.verified and s.sha256 == checkpoint.sha256[s.name] for s in report.shards)
    assert records.requests_by_shard() == {name: 1 for name in checkpoint.files}
    assert records.bytes_by_shard() == checkpoint.sizes
    assert records.peak_connections <= 3 and report.peak_slots <= 3


@pytest.mark.parametrize("fault", ["reset:0.4", "truncate:0.4", "stall:0.4", "status:500", "status:503:0",
                                   "status:429", "latency:50ms", "throttle:2MiB/s", "reset:0", "truncate:1"])
def test_a_transient_fault_is_retried_and_the_download_completes(fault, serve, checkpoint, tmp_path):
    server = serve(f"2#1={fault}")
    report, records = run(server, tmp_path / "out", concurrency=2, timeout=30, read_timeout=0.5)
    assert report.ok, report.error
    assert_complete(tmp_path / "out", checkpoint)
    second = checkpoint.files[1]
    retried = fault.split(":")[0] not in ("latency", "throttle") and fault != "truncate:1"  # all of it, then FIN
    assert records.requests_by_shard()[second] == (2 if retried else 1)
    assert all(n == 1 for name, n in records.requests_by_shard().items() if name != second)
    assert records.peak_connections <= 2


@pytest.mark.parametrize("fault", ["truncate:0.5", "stall:0.5"])
def test_resume_asks_for_the_rest_from_the_part_length(fault, serve, checkpoint, tmp_path):
    """A body cut cleanly (FIN) or stalled: every byte the server sent reached the .part, and the retry asks
    for exactly the rest with Range: bytes=SENT-."""
    server = serve(f"1#1={fault}")
    report, records = run(server, tmp_path / "out", concurrency=1, timeout=30, read_timeout=0.5)
    assert report.ok
    first, second = records.shard_requests(checkpoint.files[0])
    expected = int(0.5 * checkpoint.sizes[checkpoint.files[0]])
    assert first.range_start is None and first.bytes_sent == expected
    assert second.range_start == expected and second.status == 206
    assert second.bytes_sent == checkpoint.sizes[checkpoint.files[0]] - expected
    attempts = [a for a in report.attempts if a.shard == checkpoint.files[0]]
    assert [a.offset for a in attempts] == [0, expected] and attempts[0].bytes == expected


def test_reset_resumes_from_what_arrived(serve, checkpoint, tmp_path):
    """After an RST the client may have lost unread bytes: it resumes from what it wrote, never past it."""
    server = serve("1#1=reset:0.5")
    report, records = run(server, tmp_path / "out", concurrency=1, timeout=30)
    assert report.ok
    first, second = records.shard_requests(checkpoint.files[0])
    attempts = [a for a in report.attempts if a.shard == checkpoint.files[0]]
    assert (second.range_start or 0) == attempts[1].offset == attempts[0].bytes <= first.bytes_sent


@pytest.mark.parametrize("code, reason", [(404, "404 not found"), (403, "403 forbidden"), (400, "http 400")])
def test_4xx_is_never_retried_and_is_the_error_reported(code, reason, serve, checkpoint, tmp_path):
    server = serve(f"3=status:{code}")
    report, records = run(server, tmp_path / "out", concurrency=2, timeout=30, retries=5)
    assert not report.ok
    assert report.error.shard == checkpoint.files[2] and report.error.reason == reason
    assert records.requests_by_shard()[checkpoint.files[2]] == 1
    assert not os.path.exists(tmp_path / "out" / checkpoint.files[2])
    assert not os.path.exists(tmp_path / "out" / INDEX_NAME)
    assert_no_partial(tmp_path / "out", checkpoint)
    assert report.cancelled_at is not None


def test_checksum_mismatch_is_detected_and_nothing_lands(serve, checkpoint, tmp_path):
    server = serve("4=corrupt:0.5")
    report, records = run(server, tmp_path / "out", concurrency=2, timeout=30)
    assert not report.ok and report.error.reason == "checksum mismatch"
    assert report.error.shard == checkpoint.files[3]
    assert not os.path.exists(tmp_path / "out" / checkpoint.files[3])
    assert_no_partial(tmp_path / "out", checkpoint)


def test_retry_after_is_honoured(serve, checkpoint, tmp_path):
    server = serve("1#1=status:503:1")
    report, records = run(server, tmp_path / "out", concurrency=2, timeout=30)
    assert report.ok
    assert records.retry_gaps(checkpoint.files[0])[0] >= 0.9  # RFC 9110: wait at least Retry-After seconds
    first = next(a for a in report.attempts if a.shard == checkpoint.files[0])
    assert first.retry_after == 1.0 and first.wait >= 1.0 and first.status == 503


def test_backoff_grows_between_retries(serve, checkpoint, tmp_path):
    server = serve("1#1-3=status:500")
    report, records = run(server, tmp_path / "out", concurrency=1, timeout=30, backoff=0.1, backoff_max=10, seed=1)
    assert report.ok
    gaps = records.retry_gaps(checkpoint.files[0])
    assert len(gaps) == 3
    for n, gap in enumerate(gaps, start=1):  # jitter is in [0.5, 1] of backoff * 2**(n-1)
        assert gap >= 0.5 * 0.1 * 2 ** (n - 1) * 0.95
    waits = [a.wait for a in report.attempts if a.shard == checkpoint.files[0]][:3]
    assert all(0.5 * 0.1 * 2 ** n <= w <= 0.1 * 2 ** n for n, w in enumerate(waits))


def test_retries_run_out(serve, checkpoint, tmp_path):
    server = serve("2=status:503")
    report, records = run(server, tmp_path / "out", concurrency=2, timeout=30, retries=2)
    assert not report.ok and report.error.reason == "retries exhausted"
    assert records.requests_by_shard()[checkpoint.files[1]] == 3
    assert_no_partial(tmp_path / "out", checkpoint)


def test_deadline_cancels_everything(serve, checkpoint, tmp_path):
    """A body that stalls forever with a read timeout longer than the deadline: the deadline ends the run."""
    server = serve("2=stall:0.5; 3=stall:0.2")
    report, records = run(server, tmp_path / "out", concurrency=3, timeout=2.0, read_timeout=60)
    assert not report.ok and report.error.reason == "deadline exceeded"
    assert report.error.shard == checkpoint.files[1] and report.cancelled_at >= 2.0  # caught in flight, first
    assert {a.outcome for a in report.attempts if a.shard in checkpoint.files[1:3]} == {"cancelled"}
    assert_no_partial(tmp_path / "out", checkpoint)
    assert not any(name.endswith(".part") for name in os.listdir(tmp_path / "out"))


def test_a_retry_after_past_the_deadline_fails_at_once(serve, checkpoint, tmp_path):
    server = serve("1=status:503:3600")
    report, records = run(server, tmp_path / "out", concurrency=1, timeout=20)
    assert not report.ok and report.error.reason == "deadline exceeded" and report.elapsed < 20
    assert records.requests_by_shard()[checkpoint.files[0]] == 1


def test_concurrency_limit_is_reached_and_never_passed(serve, checkpoint, tmp_path):
    """Each response waits 1 s before its headers, so K requests overlap; never more than K connections."""
    server = serve("*=latency:1s")
    report, records = run(server, tmp_path / "out", concurrency=3, timeout=60)
    assert report.ok
    assert records.peak_connections == 3 and records.peak_in_flight == 3 and report.peak_slots == 3
    slots = {a.slot for a in report.attempts}
    assert slots == {0, 1, 2}


def test_backing_off_frees_the_slot(serve, checkpoint, tmp_path):
    """While shard 1 waits out a Retry-After, the one slot serves the other shards."""
    server = serve("1#1=status:503:1")
    report, records = run(server, tmp_path / "out", concurrency=1, timeout=30)
    assert report.ok
    shard1 = records.shard_requests(checkpoint.files[0])
    others = [r for r in records.requests if r.shard not in (None, checkpoint.files[0])]
    assert any(shard1[0].end <= r.start <= shard1[1].start for r in others)  # impossible if the slot were held


def test_cancelling_mid_flight_leaves_no_partial_file_and_no_connection(serve, checkpoint, tmp_path):
    server = serve("*=throttle:256KiB/s")
    dest = tmp_path / "out"

    async def scenario():
        task = asyncio.create_task(fetch_checkpoint(server.index_url, dest, FetchOptions(concurrency=3, **QUICK)))
        while not any(r.shard and r.bytes_sent > 0 for r in server.records.requests):
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert server.wait_idle(5.0) == 0
    assert_no_partial(dest, checkpoint)
    assert not os.path.exists(dest / INDEX_NAME)
    assert all(r.outcome in ("client-closed", "complete") for r in server.records.requests)


def test_keep_partial_lets_the_next_run_resume(serve, checkpoint, tmp_path):
    dest = tmp_path / "out"
    first = serve("1=stall:0.5")
    report, _ = run(first, dest, concurrency=1, timeout=1.5, read_timeout=60, keep_partial=True)
    assert not report.ok
    part = dest / (checkpoint.files[0] + ".part")
    assert part.exists() and part.stat().st_size == int(0.5 * checkpoint.sizes[checkpoint.files[0]])
    second = serve()
    report, records = run(second, dest, concurrency=2, timeout=30)
    assert report.ok
    assert records.shard_requests(checkpoint.files[0])[0].range_start == part_size(checkpoint)
    assert_complete(dest, checkpoint)


def test_a_stale_part_that_spoils_the_checksum_is_fetched_again_whole(serve, checkpoint, tmp_path):
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / (checkpoint.files[0] + ".part")).write_bytes(b"\0" * 1000)  # not the file's first 1000 bytes
    server = serve()
    report, records = run(server, dest, concurrency=2, timeout=30)
    assert report.ok
    assert [r.range_start for r in records.shard_requests(checkpoint.files[0])] == [1000, None]
    assert_complete(dest, checkpoint)


def test_a_write_error_is_reported_and_not_retried(serve, checkpoint, tmp_path):
    dest = tmp_path / "out"
    (dest / (checkpoint.files[1] + ".part")).mkdir(parents=True)  # the .part cannot be opened as a file
    server = serve()
    report, records = run(server, dest, concurrency=2, timeout=30)
    assert not report.ok and report.error.reason == "write error" and report.error.shard == checkpoint.files[1]
    assert records.requests_by_shard()[checkpoint.files[1]] == 1


def part_size(checkpoint) -> int:
    return int(0.5 * checkpoint.sizes[checkpoint.files[0]])


def test_index_is_fetched_with_retries_and_shards_relative_to_it(serve, checkpoint, tmp_path):
    server = serve(prefix="org/model/resolve/main")
    report, records = run(server, tmp_path / "out", concurrency=2, timeout=30)
    assert report.ok and report.shards[0].url == server.base_url + checkpoint.files[0]
    assert all(r.path.startswith("/org/model/resolve/main/") for r in records.requests)


# names as check_shard_file_name lets them through: no lone surrogates (Cs), which UTF-8 cannot encode
@given(name=st.text(st.characters(min_codepoint=32, blacklist_characters="/\\\x7f", blacklist_categories=("Cs",)),
                    min_size=1, max_size=40)
       .filter(lambda n: not n.startswith(".")),
       base=st.sampled_from(["http://h/", "http://h:8/a/b/", "https://h/org/m/resolve/main/", "http://h/a/?q=1#f",
                             "http://127.0.0.1:9/repo/"]))
def test_shard_url_is_the_rfc3986_join_of_the_quoted_name(name, base):
    """shard_url (a cheap join by hand, see the module docstring) agrees with urllib's RFC 3986 join of the
    percent-encoded name, and never leaves the index's folder whatever the name holds (?, #, :, %, spaces)."""
    from urllib.parse import quote, urljoin, urlsplit

    from ringlab.shards.fetch import shard_url

    index_url = urljoin(base, INDEX_NAME) + ("?download=1" if "?" in base else "")
    url = shard_url(index_url, name)
    assert url == urljoin(index_url, quote(name))
    assert urlsplit(url).path.rpartition("/")[0] == urlsplit(index_url).path.rpartition("/")[0]


def test_missing_index_is_reported(serve, tmp_path):
    server = serve()
    report = fetch(server.base_url + "nope.json", tmp_path / "out", concurrency=1, timeout=10, **QUICK)
    assert not report.ok and report.error.shard == INDEX_NAME and report.error.reason == "404 not found"


def test_headers_are_read_as_the_hub_writes_them():
    sha = "a" * 64
    assert linked_etag({"x-linked-etag": f'"{sha}"'}) == sha
    assert linked_etag({"x-linked-etag": f'W/"{sha.upper()}"'}) == sha
    assert linked_etag({"x-linked-etag": '"abc"'}) is None and linked_etag({}) is None
    assert parse_retry_after("2") == 2.0 and parse_retry_after("junk") is None and parse_retry_after(None) is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412475.0) == pytest.approx(5.0)
    assert parse_retry_after("-1") is None


def test_bad_options_are_refused():
    for bad in (dict(concurrency=0), dict(timeout=0), dict(retries=-1), dict(timeout=float("nan")),
                dict(concurrency=True)):
        with pytest.raises(ValueError):
            FetchOptions(**bad)


TRANSIENT = st.sampled_from(["reset:0.3", "truncate:0.6", "status:500", "status:503:0", "status:429", "latency:20ms",
                             "stall:0.5"])


@pytest.mark.slow
@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(script=st.dictionaries(st.integers(1, 6), st.tuples(TRANSIENT, st.integers(1, 2)), max_size=4),
       concurrency=st.integers(1, 4))
def test_any_transient_script_within_the_retries_completes(script, concurrency, checkpoint, tmp_path_factory):
    """Faults on the first one or two requests of any shards, with 2 retries: always complete, exactly one
    extra request per fault that makes the client retry, never more than K connections."""
    from ringlab.shards import ShardServer

    spec = "; ".join(f"{k}#1-{n}={fault}" for k, (fault, n) in script.items())
    dest = tmp_path_factory.mktemp("out")
    with ShardServer(checkpoint.folder, spec) as server:
        report, records = run(server, dest, concurrency=concurrency, timeout=60, retries=2, read_timeout=0.5)
    assert report.ok, (spec, report.error)
    assert_complete(dest, checkpoint)
    for k, name in enumerate(checkpoint.files, start=1):
        fault, n = script.get(k, ("", 0))
        extra = 0 if fault.startswith("latency") else n
        assert records.requests_by_shard()[name] == 1 + extra, (spec, name)
    assert records.peak_connections <= concurrency


def test_a_shard_is_streamed_never_held_whole(tmp_path):
    """Python allocations of the fetcher while it downloads two 8 MiB shards stay far below one shard: the body
    goes to disk as it arrives (tracemalloc counts every bytes object httpx and the fetcher make; the server
    runs in its own process so that only the client is counted)."""
    import subprocess
    import sys
    import tracemalloc

    from ringlab.shards import write_checkpoint

    ckpt = write_checkpoint(tmp_path / "src", shards=2, shard_size=8 * 2**20, seed=0)
    server = subprocess.Popen([sys.executable, "-m", "ringlab", "shards", "serve", "--dir", ckpt.folder],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
    try:
        url = server.stdout.readline().strip()
        fetch(url, tmp_path / "warm-up", concurrency=2, timeout=60, **QUICK)  # first use imports httpx's backends
        tracemalloc.start()
        try:
            report = fetch(url, tmp_path / "out", concurrency=2, timeout=60, **QUICK)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        server.terminate()
        server.communicate(timeout=30)
    assert report.ok
    assert peak < 2 * 2**20, f"{peak:,} bytes allocated at once"  # a quarter of one shard
