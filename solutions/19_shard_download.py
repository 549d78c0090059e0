"""19a: download a sharded checkpoint concurrently, with a limit, timeouts, retries and clean cancellation.

Grade it: ``ringlab check 19a`` or, in a notebook, ``ringlab.check.grade("19a")``.
Hints: ``ringlab.check.hint("19a", 1)`` (2 and 3 say more).

The grader starts a local shard server with scripted faults (``ringlab.shards.ShardServer``), runs your
function against it and judges from what the server recorded (connections, requests, Range headers,
gaps between retries) and from the files left in ``dest``.
"""

import asyncio
import email.utils
import hashlib
import json
import os
import random
import time
from urllib.parse import urljoin

import httpx

INDEX_NAME = "model.safetensors.index.json"
RETRY_STATUS = {408, 429, 500, 502, 503, 504}  # worth another try; every other 4xx/5xx is final


class ShardError(Exception):
    """A shard that cannot be fetched: the message is "FILE: REASON"."""


def retry_after_seconds(value):
    """Seconds a ``Retry-After`` header value asks for (a number of seconds or an HTTP date), else None."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())


def sha256_file(path):
    """Lowercase hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


async def download_shards(index_url, dest, *, concurrency, timeout, connect_timeout=5.0, read_timeout=5.0,
                          retries=3, backoff=0.25):
    """Fetch every shard a Hugging Face ``model.safetensors.index.json`` names into the folder ``dest``.

    Args:
        index_url: URL of the index; each shard's URL is the index URL joined with its file name
            (``urllib.parse.urljoin``). The shards are the distinct values of the index's ``weight_map``.
        dest: folder to write into (create it if missing).
        concurrency: the most requests (and TCP connections) open at once, K >= 1.
        timeout: seconds for the WHOLE download: when it passes, cancel everything and raise TimeoutError.
        connect_timeout: seconds to open one connection.
        read_timeout: seconds of silence allowed between two reads of one response body.
        retries: further attempts per shard after the first, for 408, 429, 5xx and transport errors
            (a reset, a truncated body, a read timeout). Never retry any other 4xx (404, 403).
        backoff: seconds before retry n is ``backoff * 2**(n-1)`` times a random factor in [0.5, 1]; when the
            server sent ``Retry-After`` (seconds or an HTTP date) wait at least that long.

    Each shard is streamed (never whole in memory) into ``NAME.part``; a retry after some bytes arrived
    resumes with ``Range: bytes=N-`` (a 206 appends; a 200 starts again). The file's sha256 must equal the
    ``X-Linked-Etag`` header (quoted hex, as the Hub sends for LFS files) when present; only then is it
    renamed to ``NAME`` (``os.replace``), so a file at a final path is always complete and verified.

    Returns the sorted list of shard file names; on success ``dest`` holds the index (written last) and the
    shards, nothing else. On the first permanent failure (a 404 or 403, a checksum mismatch, retries used
    up) cancel every other request, wait for them to stop, close every connection and raise an exception
    whose message starts with the shard's file name and gives the reason ("404", "403", "checksum
    mismatch"). When the function returns or raises, no task it started is still running.
    """
    ### BEGIN SOLUTION

    async def fetch_shard(client, limit, url, name):
        part = os.path.join(dest, name + ".part")
        if os.path.exists(part):
            os.remove(part)
        reason = ""
        for attempt in range(retries + 1):
            async with limit:  # released on every exit: return, exception, cancellation
                try:
                    status, retry_after, expected = await fetch_once(client, url, part)
                except httpx.TransportError as exc:  # timeouts, resets, truncated bodies: retried
                    status, retry_after, expected = None, None, None
                    reason = type(exc).__name__
            if status in (200, 206):
                if expected is not None and sha256_file(part) != expected:
                    os.remove(part)
                    raise ShardError(f"{name}: checksum mismatch (X-Linked-Etag {expected})")
                os.replace(part, os.path.join(dest, name))
                return
            if status is not None:
                if status not in RETRY_STATUS:
                    raise ShardError(f"{name}: HTTP {status}")
                reason = f"HTTP {status}"
            if attempt < retries:  # the slot is free while we wait
                wait = backoff * 2 ** attempt * random.uniform(0.5, 1.0)
                await asyncio.sleep(max(wait, retry_after or 0.0))
        raise ShardError(f"{name}: retries exhausted ({reason})")

    async def fetch_once(client, url, part):
        """One GET, resuming from the .part file: (status, Retry-After seconds or None, expected sha256 or None)."""
        have = os.path.getsize(part) if os.path.exists(part) else 0
        headers = {"Range": f"bytes={have}-"} if have else {}
        async with client.stream("GET", url, headers=headers) as response:  # the body is closed on every exit
            if response.status_code not in (200, 206):
                return response.status_code, retry_after_seconds(response.headers.get("retry-after")), None
            with open(part, "ab" if response.status_code == 206 else "wb") as f:
                async for chunk in response.aiter_bytes():  # as it arrives: a chunk size would hold bytes back
                    f.write(chunk)
            # the Hub sends a LFS file as a 302 to its CDN, X-Linked-Etag on the 302: look there too
            etags = [r.headers.get("x-linked-etag") for r in (response, *response.history)]
            etag = next((e for e in etags if e), None)
            return response.status_code, None, etag.strip('"') if etag else None

    os.makedirs(dest, exist_ok=True)
    limit = asyncio.Semaphore(concurrency)
    per_request = httpx.Timeout(connect=connect_timeout, read=read_timeout, write=read_timeout, pool=None)
    async with asyncio.timeout(timeout):  # the deadline for everything: TimeoutError when it passes
        # the client closes every connection on the way out; redirects followed (the Hub's 302s to its CDN)
        async with httpx.AsyncClient(timeout=per_request, follow_redirects=True) as client:
            response = await client.get(index_url)
            if response.status_code != 200:
                raise ShardError(f"{INDEX_NAME}: HTTP {response.status_code}")
            index = response.content
            names = sorted(set(json.loads(index)["weight_map"].values()))
            for name in names:  # the index comes from the network: "../x" or "/etc/x" must not escape dest
                if not isinstance(name, str) or not name or name != os.path.basename(name) or name.startswith("."):
                    raise ShardError(f"{INDEX_NAME}: {name!r} is not a plain file name")
            try:
                async with asyncio.TaskGroup() as group:  # one failure cancels the rest and waits for them
                    for name in names:
                        group.create_task(fetch_shard(client, limit, urljoin(index_url, name), name))
            except ExceptionGroup as failed:
                raise failed.exceptions[0] from None  # the first error, in words that name the shard
    with open(os.path.join(dest, INDEX_NAME), "wb") as f:
        f.write(index)
    return names
    ### END SOLUTION
