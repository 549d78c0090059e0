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
    raise NotImplementedError("19a: replace this line with your code")
