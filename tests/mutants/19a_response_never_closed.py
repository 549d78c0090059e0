"""Leaves a failed attempt's response open: its connection leaks."""

EXPECT = ['never closed', 'connection leak']

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
        have = os.path.getsize(part) if os.path.exists(part) else 0
        headers = {"Range": f"bytes={have}-"} if have else {}
        response = await client.send(client.build_request("GET", url, headers=headers), stream=True)
        if response.status_code not in (200, 206):  # returns without closing the response
            return response.status_code, retry_after_seconds(response.headers.get("retry-after")), None
        with open(part, "ab" if response.status_code == 206 else "wb") as f:
            async for chunk in response.aiter_bytes():
                f.write(chunk)
        await response.aclose()
        etag = response.headers.get("x-linked-etag")
        return response.status_code, None, etag.strip('"') if etag else None

    os.makedirs(dest, exist_ok=True)
    limit = asyncio.Semaphore(concurrency)
    per_request = httpx.Timeout(connect=connect_timeout, read=read_timeout, write=read_timeout, pool=None)
    async with asyncio.timeout(timeout):  # the deadline for everything: TimeoutError when it passes
        async with httpx.AsyncClient(timeout=per_request) as client:  # closes every connection on the way out
            response = await client.get(index_url)
            if response.status_code != 200:
                raise ShardError(f"{INDEX_NAME}: HTTP {response.status_code}")
            index = response.content
            names = sorted(set(json.loads(index)["weight_map"].values()))
            try:
                async with asyncio.TaskGroup() as group:  # one failure cancels the rest and waits for them
                    for name in names:
                        group.create_task(fetch_shard(client, limit, urljoin(index_url, name), name))
            except ExceptionGroup as failed:
                raise failed.exceptions[0] from None  # the first error, in words that name the shard
    with open(os.path.join(dest, INDEX_NAME), "wb") as f:
        f.write(index)
    return names
