"""Known-wrong answers written as small edits of a solution.

A mistake that changes a line or two of a long answer (the 12a kernel) is kept here as the
edit itself, applied to the current solution, rather than as another full copy of the answer.
Mistakes that reshape an answer stay whole files in ``tests/mutants/``.

Each entry: name -> (solution file, edits, EXPECT, why). An edit is ``(text, replacement, count)``:
``text`` must occur exactly ``count`` times in the solution, so editing the solution cannot
silently turn a mutant back into a right answer. EXPECT lists the words the grader's first
failure message must contain.
"""

from pathlib import Path

SOLUTIONS = Path(__file__).resolve().parents[1] / "solutions"

_KERNEL = "12_triton_layernorm.py"
_RSTD = "rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)"
_CENTRED = "centred = tl.where(mask, x - mean, 0.0)"
_BLOCKS = "14_paged_kv_blocks.py"
_STEP = "15_continuous_batching.py"
_NCCL = "16_reading_nccl.py"

_RING = "01_ring_allreduce.py"

_KV = "05_kv_cache.py"

_SMI = "09_gpu_monitor.py"

_TRAFFIC = "21_serving_real_traffic.py"

_ACC = "11_grad_accumulation.py"

# 19a's worked answer: the lines its classic mistakes touch
_SHARDS = "19_shard_download.py"
_PER_REQUEST = "per_request = httpx.Timeout(connect=connect_timeout, read=read_timeout, write=read_timeout, pool=None)"
_LIMIT = "async with limit:  # released on every exit: return, exception, cancellation"
_FIRST_ERROR = "raise failed.exceptions[0] from None  # the first error, in words that name the shard"

EDITS = {
    "16a_first_via_line": (_NCCL, [('wanted = [v for v in via if v.startswith("NET/")] if nodes > 1 else '
                                     '[v for v in via if not v.startswith("NET/")]', "wanted = via", 1)],
                            ["transport should be 'IB'", "between nodes"],
                            "names the first 'via' line of a multi-node log: intra-node P2P, not the fabric"),
    "16a_out_of_place_wrong_only": (_NCCL, [("for i in (8, 12)", "for i in (8,)", 1)],
                                     ["healthy should be False", "#wrong > 0"],
                                     "reads #wrong of the out-of-place half only; the in-place half fails too"),
    "16a_any_gdrdma": (_NCCL, [('all("/GDRDMA" in v for v in wanted)', 'any("/GDRDMA" in v for v in wanted)', 1)],
                        ["healthy should be False", "GDRDMA"],
                        "one channel with GPUDirect RDMA is taken for all: the others stage through host memory"),
    "16a_shm_is_fine": (_NCCL, [('healthy = healthy and transport != "SHM"', "healthy = bool(healthy)", 1)],
                         ["healthy should be False", "SHM"], "SHM inside one node: peer-to-peer is off, not healthy"),
    "11a_divides_by_world_size_too": (_ACC, [("/ k).backward()", "/ (k * __import__(\"torch\").distributed.get_world_size())).backward()", 2)],
                                       ["1/2 of the full-batch gradient", "already averages over ranks"],
                                       "scales the loss by 1/(K N): DDP's own 1/N average is applied twice"),
    "09a_accepts_a_sign": (_SMI, [(r'NUMBER = re.compile(r"(\d+', r'NUMBER = re.compile(r"(-?\d+', 1)],
                            ["should be None", "-5"], "reads '-5' as a utilization of -5 %"),
    "09a_partial_match": (_SMI, [("NUMBER.fullmatch(text)", "NUMBER.search(text)", 1)],
                           ["should be None", "1.2.3"], "re.search finds 1.2 inside '1.2.3' and 12 inside 'abc 12'"),
    "08a_v_everywhere": ("08_pipeline_bubbles.py", [('v = virtual_stages if schedule == "interleaved-1f1b" else 1',
                                                      "v = virtual_stages", 1)],
                          ["has no model chunks", "does not apply"], "divides GPipe's and 1F1B's bubble by v too"),
    "05a_ignores_use_sliding_window": (_KV, [('config.get("sliding_window") if config.get("use_sliding_window", True) '
                                               'else None', 'config.get("sliding_window")', 1)],
                                        ["use_sliding_window = false", "Qwen/Qwen2-72B"],
                                        "caps Qwen2's cache at a window its config switches off"),
    "05a_head_dim_from_kv_heads": (_KV, [('config["hidden_size"] // config["num_attention_heads"]',
                                           'config["hidden_size"] // config["num_key_value_heads"]', 1)],
                                    ["dividing by num_key_value_heads", "head_dim is hidden_size // num_attention_heads"],
                                    "head_dim from the KV heads: the same 8x as counting query heads, another cause"),
    "01a_promotes_to_float64": (_RING, [("np.array(a, copy=True)", "np.array(a, dtype=np.float64, copy=True)", 1)],
                                 ["returned float64", "keep the input's dtype"],
                                 "works in float64 and returns it: right sums for int64, the wrong dtype for the rest"),
    "01a_each_rank_sums_itself": (_RING, [("outputs = [np.concatenate(chunks) if chunks else np.zeros(0) for chunks in work]",
                                            "outputs = [sum(arrays[(r + k) % n] for k in range(n)) for r in range(n)]", 1)],
                                   ["bit-identical", "last bits"],
                                   "each rank adds the inputs in its own order: float results drift apart by an ulp"),
    "01a_valid_other_rotation": (_RING, [("(r + 1 - s) % n", "(r + 2 - s) % n", 2), ("(r - s) % n", "(r + 1 - s) % n", 2)],
                                  ["your rotation differs from the documented one"],
                                  "a correct ring shifted by one chunk: right sums, right totals, other steps"),
    "12a_forgets_eps": (_KERNEL, [(_RSTD, "rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols)", 1)],
                         ["rstd is", "eps is missing"],
                         "rstd = 1 / sqrt(var): too large by about 1 + eps / (2 var), infinite on a constant row"),
    "12a_unbiased_variance": (_KERNEL, [(_RSTD, "rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / (n_cols - 1) + eps)", 1)],
                               ["rstd is", "unbiased variance", "n_cols=7"],
                               "divides by D - 1; layer_norm uses the biased variance (and D = 1 gives 0/0)"),
    "12a_padding_in_variance": (_KERNEL, [(_CENTRED, "centred = x - mean", 1)],
                                 ["rstd is", "padded lanes", "n_cols=7"],
                                 "each padded lane adds (0 - mean)**2 to the sum of squares"),
    "12a_unmasked_store": (_KERNEL, [("tl.store(y_row + cols, y.to(Y.dtype.element_ty), mask=mask)",
                                       "tl.store(y_row + cols, y.to(Y.dtype.element_ty))", 1)],
                            ["wrote column 7", "past the row", "mask it"],
                            "right values, but the padded lanes are stored too: into the next row on a GPU"),
    "12a_fp16_accumulation": (_KERNEL, [
        ("acc = tl.full([BLOCK_D], 0.0, tl.float32)", "acc = tl.full([BLOCK_D], 0.0, X.dtype.element_ty)", 2),
        ("acc += tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)",
         "acc += tl.load(x_row + cols, mask=cols < n_cols, other=0.0)", 1),
        (_CENTRED, "centred = tl.where(mask, x - mean, 0.0).to(X.dtype.element_ty)", 1),
    ], ["dtype=float16", "mean is", "fp16 rounding"],
        "sums and squares in the input dtype: fp16 running sums keep 11 significant bits"),
    "14a_leaks_on_free": (_BLOCKS, [("                self.free_list.append(block)\n", "", 1)],
                           ["free(", "leak"], "a freed block never goes back to the free list"),
    "14a_no_copy_on_write": (_BLOCKS, [("if len(tokens) % bs == 0 or self.ref[table[-1]] > 1:",
                                         "if len(tokens) % bs == 0:", 1)],
                              ["copy-on-write", "corrupts"], "a fork's first write lands in the block its sibling reads"),
    "14a_hashes_partial_block": (_BLOCKS, [("for i in range(len(token_ids) // bs):",
                                             "for i in range(-(-len(token_ids) // bs)):", 1),
                                            ("partial = len(token_ids) % bs != 0", "partial = False", 1)],
                                  ["partial block"], "the last, partial block gets a key and is shared by hash"),
    "14a_unchained_key": (_BLOCKS, [("parent = (parent, tuple(token_ids[i * bs:(i + 1) * bs]))",
                                      "parent = (None, tuple(token_ids[i * bs:(i + 1) * bs]))", 1)],
                           ["different prefixes", "chain"], "a block's key is its tokens only, not its prefix"),
    "14a_frees_shared_blocks": (_BLOCKS, [("            self.ref[block] -= 1\n            if self.ref[block] == 0:\n"
                                            "                key = self.key_of.pop(block, None)",
                                            "            self.ref[block] = 0\n            if self.ref[block] == 0:\n"
                                            "                key = self.key_of.pop(block, None)", 1)],
                                 ["still holds"], "free ignores reference counts: a fork's blocks are freed under it"),
    "15a_no_decode_room": (_STEP, [('if request["blocks"] + 1 > free - watermark_blocks:',
                                     'if request["blocks"] > free - watermark_blocks:', 1)],
                            ["without reserving decode room"], "admits a prompt that leaves no block to decode into"),
    "15a_admits_first": (_STEP, [
        ("    alive = list(running)\n    free, decode, preempt = free_blocks, [], []\n",
         "    free, admit = free_blocks, []\n    for request in waiting:\n"
         "        if request[\"blocks\"] + 1 > free - watermark_blocks:\n            break\n"
         "        admit.append(request[\"id\"])\n        free -= request[\"blocks\"]\n"
         "    alive = list(running)\n    decode, preempt = [], []\n", 1),
        ("    admit = []\n    for request in waiting:\n"
         "        if request[\"blocks\"] + 1 > free - watermark_blocks:  # no room for its first decode token\n"
         "            break\n        admit.append(request[\"id\"])\n        free -= request[\"blocks\"]\n", "", 1),
    ], ["admitted request", "grow before anyone is admitted"],
        "admits before the running grow (P14's livelock order), decode room reserved for the newcomer only"),
    "15a_preempts_oldest": (_STEP, [("victim = alive.pop()", "victim = alive.pop(0)", 1)],
                             ["the oldest", "livelock"], "the oldest request is evicted whenever anyone needs a block"),
    "15a_no_growth_into_watermark": (_STEP, [("while free == 0:", "while free <= watermark_blocks:", 1)],
                                      ["grow into the watermark", "preempted"],
                                      "keeps the watermark free from the running requests too: preempts instead"),
    "15a_overtakes": (_STEP, [("# no room for its first decode token\n            break",
                               "# no room for its first decode token\n            continue", 1)],
                      ["FCFS", "overtak"], "skips a request that does not fit and admits a smaller one behind it"),
    "15a_forgets_admitted_blocks": (_STEP, [('        free -= request["blocks"]\n', "", 1)],
                                    ["did not subtract", "admitted before it"],
                                    "checks every waiting request against the same free count: admits more than fits"),
    "14a_append_blocks_unkeyed": (_BLOCKS, [("if len(tokens) % bs == 0:  # the block is full now: make it shareable",
                                              "if False:", 1)],
                                   ["append_token", "key"],
                                   "a block filled by decoding never gets its chain key: a later equal prompt can't share it"),
    "14a_failed_allocate_keeps_blocks": (_BLOCKS, [("if need > len(self.free_list):", "if False:", 1),
                                                    ("        block = self.free_list.pop()\n",
                                                     "        if not self.free_list:\n"
                                                     "            raise OutOfBlocksError(\"pool empty\", 1, 0)\n"
                                                     "        block = self.free_list.pop()\n", 1)],
                                          ["OutOfBlocksError", "change nothing"],
                                          "takes blocks one by one and raises when the pool runs dry, keeping the ones taken"),
    "13a_nic_on_tie": ("13_nvlink_and_fabric.py", [("nic_bound < nvlink_bound", "nic_bound <= nvlink_bound", 1)],
                       ["tie", "'nvlink'"], "names the NIC when both links saturate at the same busbw"),
    "16a_na_counts_as_wrong": (_NCCL, [('wrong += sum(int(fields[i]) for i in (8, 12) if fields[i] != "N/A")',
                                        'wrong += sum(1 if fields[i] == "N/A" else int(fields[i]) for i in (8, 12))', 1)],
                               ["N/A", "not checked"], "reads #wrong N/A (results not checked, -c 0) as wrong results"),
    "19a_one_task_per_shard": (_SHARDS, [(_LIMIT, "if True:  # no limit: every shard's request goes out at once", 1)],
                               ["requests at once", "nothing bounds"],
                               "one task per shard and nothing bounding them: every request goes out at once"),
    "19a_permit_not_released": (_SHARDS, [
        (_LIMIT, "await limit.acquire()  # given back below, on success or a final status only\n            if True:", 1),
        ("            if status in (200, 206):\n", "            if status in (200, 206):\n                limit.release()\n", 1),
        ("                if status not in RETRY_STATUS:\n",
         "                if status not in RETRY_STATUS:\n                    limit.release()\n", 1),
    ], ["semaphore", "error path"],
        "acquires the semaphore by hand and releases it on success or a final status only: a failed attempt keeps it"),
    "19a_connect_timeout_only": (_SHARDS, [(_PER_REQUEST, "per_request = httpx.Timeout(None, connect=connect_timeout)", 1)],
                                 ["no read timeout"],
                                 "sets only a connect timeout: a body that goes silent is waited for until the deadline"),
    "19a_timeout_per_request": (_SHARDS, [
        (_PER_REQUEST, "per_request = httpx.Timeout(timeout)", 1),
        ("async with asyncio.timeout(timeout):  # the deadline for everything: TimeoutError when it passes",
         "if True:  # every request has its timeout: that must be enough", 1),
    ], ["whole download", "not a per-request timeout"],
        "takes the overall timeout for a per-request one: the whole download may run past it"),
    "19a_response_never_closed": (_SHARDS, [
        ('async with client.stream("GET", url, headers=headers) as response:  # the body is closed on every exit',
         'response = await client.send(client.build_request("GET", url, headers=headers), stream=True)\n'
         "        if True:  # an error status returns without closing the response", 1),
        ("                    f.write(chunk)\n", "                    f.write(chunk)\n            await response.aclose()\n", 1),
    ], ["never closed", "connection leak"], "leaves a failed attempt's response open: its connection leaks"),
    "19a_tasks_left_running": (_SHARDS, [(
        "            try:\n"
        "                async with asyncio.TaskGroup() as group:  # one failure cancels the rest and waits for them\n"
        "                    for name in names:\n"
        "                        group.create_task(fetch_shard(client, limit, urljoin(index_url, name), name))\n"
        "            except ExceptionGroup as failed:\n"
        f"                {_FIRST_ERROR}\n",
        "            tasks = [asyncio.create_task(fetch_shard(client, limit, urljoin(index_url, name), name))\n"
        "                     for name in names]\n"
        "            await asyncio.gather(*tasks)  # raises the first error; nobody stops the rest\n", 1)],
        ["tasks still running"], "gathers the tasks: the first error propagates, the other tasks keep running"),
    "19a_retries_4xx": (_SHARDS, [('                if status not in RETRY_STATUS:\n'
                                   '                    raise ShardError(f"{name}: HTTP {status}")\n', "", 1)],
                        ["retried", "will not change"], "retries every failed status, 404 and 403 included"),
    "19a_no_backoff": (_SHARDS, [("                wait = backoff * 2 ** attempt * random.uniform(0.5, 1.0)\n"
                                  "                await asyncio.sleep(max(wait, retry_after or 0.0))\n",
                                  "                await asyncio.sleep(retry_after or 0.0)\n", 1)],
                       ["without backoff"], "retries as soon as an attempt fails (honouring Retry-After only)"),
    "19a_ignores_retry_after": (_SHARDS, [('retry_after_seconds(response.headers.get("retry-after"))', "None", 1)],
                                ["Retry-After ignored"], "backs off but ignores the server's Retry-After"),
    "19a_writes_final_path": (_SHARDS, [('part = os.path.join(dest, name + ".part")', "part = os.path.join(dest, name)", 1)],
                              ["partial or unverified file at the final path"],
                              "streams straight into the final file name: a failure leaves a partial file there"),
    "19a_no_checksum": (_SHARDS, [("                if expected is not None and sha256_file(part) != expected:\n"
                                   "                    os.remove(part)\n"
                                   '                    raise ShardError(f"{name}: checksum mismatch (X-Linked-Etag {expected})")\n',
                                   "", 1)],
                        ["checksum not verified"], "never compares the file's sha256 with X-Linked-Etag"),
    "19a_resume_from_zero": (_SHARDS, [('headers = {"Range": f"bytes={have}-"} if have else {}', "headers = {}", 1)],
                             ["not from byte 0"], "retries a shard from byte 0 instead of resuming with Range"),
    "19a_swallows_first_error": (_SHARDS, [(_FIRST_ERROR, "pass  # carry on with what arrived", 1)],
                                 ["first error swallowed"],
                                 "catches the failed tasks' errors and returns as if all went well"),
    "19a_raises_the_group": (_SHARDS, [(_FIRST_ERROR, "raise  # the ExceptionGroup itself", 1)],
                             ["should name the first failure"],
                             "lets the TaskGroup's ExceptionGroup out: its message names no shard"),
    "21a_hits_past_first_miss": (_TRAFFIC, [("hits += len(held)", "hits += sum(key in block_of for key in keys)", 1)],
                                 ["past its first miss", "longest cached prefix"],
                                 "counts every cached id of a request, not only its cached prefix"),
    "21a_no_eviction": (_TRAFFIC, [("OrderedDict.fromkeys(range(num_blocks))",
                                    "OrderedDict.fromkeys(range(sum(map(len, requests)) + len(requests)))", 1)],
                        ["infinite-cache ceiling", "evicts"], "a pool sized by the trace: nothing is ever evicted"),
    "21a_evicts_most_recent": (_TRAFFIC, [("free.popitem(last=False)", "free.popitem()", 1)],
                               ["most recently freed", "least recently used"],
                               "takes fresh blocks from the tail of the queue: the blocks just freed are evicted"),
    "21a_frees_first_to_last": (_TRAFFIC, [("for block in reversed(held):", "for block in held:", 1)],
                                ["first to last", "head is evicted before its tail"],
                                "frees a request's first block first: its prefix's head goes before its tail"),
    "21a_counts_requests": (_TRAFFIC, [("hits += len(held)", "hits += bool(held)", 1),
                                       ("listed += len(keys)", "listed += 1", 1)],
                            ["fraction of requests", "counts blocks"],
                            "counts the requests with any hit over all requests, not blocks"),
    "21a_returns_hits": (_TRAFFIC, [("return hits / listed", "return hits", 1)],
                         ["number of hit blocks", "hits / listed"], "returns the hit count, not the rate"),
}


def mutated_source(name: str) -> str:
    """The solution's text with the edits of mutant ``name`` applied; ValueError if an edit no longer fits."""
    solution, edits, _, _ = EDITS[name]
    text = (SOLUTIONS / solution).read_text()
    for old, new, count in edits:
        found = text.count(old)
        if found != count:
            raise ValueError(f"{name}: expected {count} x {old!r} in solutions/{solution}, found {found}")
        text = text.replace(old, new)
    return text


# Exercise 19b is Go: its known-wrong answers are edits of the worked solution go/shards/solution/download.go, in
# the same form (name -> (edits, EXPECT, why)); tests/check/graders/test_shard_download_go.py grades each.
GO_SOLUTION = Path(__file__).resolve().parents[1] / "go" / "shards" / "solution" / "download.go"
_ONE_WORKER_PER_SHARD = [("\tworkers := opts.Concurrency\n\tif len(names) < workers {\n\t\tworkers = len(names)\n\t}\n",
                          "\tworkers := len(names)\n", 1),
                         ("\t\tMaxConnsPerHost:       opts.Concurrency,\n", "", 1)]
GO_EDITS = {
    "19b_no_limit": (_ONE_WORKER_PER_SHARD, ["requests at once", "no limit"],
                     "a goroutine per shard, nothing bounds them"),
    "19b_semaphore_leak": (
        [*_ONE_WORKER_PER_SHARD,
         ("\trng    *rand.Rand\n}", "\trng    *rand.Rand\n\tslots  chan struct{}\n}", 1),
         ("rng: rand.New(rand.NewSource(time.Now().UnixNano()))}",
          "rng: rand.New(rand.NewSource(time.Now().UnixNano())), slots: make(chan struct{}, opts.Concurrency)}", 1),
         ("\toffset, err := f.Seek(0, io.SeekEnd)\n",
          "\tselect {\n\tcase d.slots <- struct{}{}:\n\tcase <-ctx.Done():\n\t\treturn \"\", ctx.Err()\n\t}\n"
          "\toffset, err := f.Seek(0, io.SeekEnd)\n", 1),
         ("\t// the Hub answers a LFS file with a 302", "\t<-d.slots // released on success only\n"
          "\t// the Hub answers a LFS file with a 302", 1)],
        ["never requested", "semaphore not released"], "a slot taken per attempt and given back only when it succeeds"),
    "19b_connect_timeout_only": (
        [("\t\tResponseHeaderTimeout: opts.ReadTimeout,\n", "", 1),
         ("time.AfterFunc(d.opts.ReadTimeout, func() { idle.expired.Store(true); cancel() })",
          "time.NewTimer(d.opts.ReadTimeout)", 1)],
        ["only a connect timeout"], "bounds the dial and nothing else: a silent body hangs until the deadline"),
    "19b_request_timeout": (
        [("client: &http.Client{Transport: transport}",
          "client: &http.Client{Transport: transport, Timeout: opts.ReadTimeout}", 1)],
        ["per-request", "whole request"], "http.Client.Timeout = ReadTimeout cuts a slow but live transfer"),
    "19b_body_not_closed": (
        [("\t\t// drain a little so the connection can be reused, and always close\n"
          "\t\t_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))\n\t\tresp.Body.Close()\n\t\tcancel()\n",
          "\t\tdefer time.AfterFunc(time.Hour, cancel) // the response stays live: its body is never closed\n", 1),
         ("\t\tMaxConnsPerHost:       opts.Concurrency,\n", "", 1)],
        ["never closed"], "the body of an error status is never closed: its connection leaks"),
    "19b_goroutines_after_cancel": (
        [("\twork, cancel := context.WithCancel(ctx)\n\tdefer cancel()\n", "\twork := ctx\n", 1),
         ("\tdefer dialed.closeAll()\n", "", 1),
         ("\tfail := func(err error) { once.Do(func() { first = err; cancel() }) }\n",
          "\tfailed := make(chan struct{})\n"
          "\tfail := func(err error) { once.Do(func() { first = err; close(failed) }) }\n", 1),
         ("\t\tcase <-work.Done():\n\t\t\tbreak feed\n", "\t\tcase <-failed:\n\t\t\tbreak feed\n", 1),
         ("\tclose(jobs)\n\twg.Wait()\n",
          "\tclose(jobs)\n\tdone := make(chan struct{})\n\tgo func() { wg.Wait(); close(done) }()\n"
          "\tselect {\n\tcase <-done:\n"
          "\tcase <-failed: // return the first error at once, the others still running\n\t}\n", 1)],
        ["goroutines still running after cancel"],
        "returns the first error without cancelling or waiting for the other workers"),
    "19b_retries_4xx": (
        [("if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {",
          "if resp.StatusCode >= 400 {", 1)],
        ["retried", "will not change"], "every error status retried, 404 and 403 too"),
    "19b_no_backoff": ([("\t\twait := d.backoff(n)\n", "\t\twait := time.Duration(0)\n", 1)],
                       ["without backoff"], "retries at once (Retry-After still honoured)"),
    "19b_retry_after_ignored": ([("\t\tif again.after > wait {\n\t\t\twait = again.after\n\t\t}\n", "", 1)],
                                ["Retry-After ignored"], "backs off but never reads Retry-After"),
    "19b_partial_at_final": ([("\tpart := final + \".part\"\n", "\tpart := final // written in place\n", 1)],
                             ["partial or unverified file at the final path"],
                             "writes the shard at its final path: a cut download leaves it there"),
    "19b_checksum_unverified": ([("\t\tif got != etag {\n", "\t\tif got == \"\" {\n", 1)],
                                ["checksum not verified"], "hashes the file but never compares it with X-Linked-Etag"),
    "19b_resume_from_zero": ([("\toffset, err := f.Seek(0, io.SeekEnd)\n",
                               "\toffset, err := f.Seek(0, io.SeekStart)\n", 1)],
                             ["not from byte 0"], "a retry overwrites the .part from byte 0 with no Range"),
    "19b_first_error_swallowed": (
        [("\t\t\t\tcase work.Err() == nil: // a real failure, not the echo of another worker's\n"
          "\t\t\t\t\tfail(fmt.Errorf(\"shard %s: %w\", name, err))\n",
          "\t\t\t\tcase work.Err() == nil:\n"
          "\t\t\t\t\tfmt.Fprintf(os.Stderr, \"shard %s: %v\\n\", name, err) // logged, not returned\n", 1)],
        ["first error swallowed"], "a worker's error is printed and forgotten"),
}


def go_mutated_source(name: str) -> str:
    """The Go solution's text with the edits of mutant ``name`` applied; ValueError if an edit no longer fits."""
    edits, _, _ = GO_EDITS[name]
    text = GO_SOLUTION.read_text()
    for old, new, count in edits:
        found = text.count(old)
        if found != count:
            raise ValueError(f"{name}: expected {count} x {old!r} in {GO_SOLUTION.name}, found {found}")
        text = text.replace(old, new)
    return text
