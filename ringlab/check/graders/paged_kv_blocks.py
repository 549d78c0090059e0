"""Grader for topic 14, the paged KV block allocator (card 14).

14a replays a program of allocate / append_token / fork / free calls on the learner's allocator and
on :class:`ringlab.serving.BlockManager`, and after every call compares what can be compared whatever
the block ids: the free-block count, each table's length, and which (sequence, index) pairs share a
physical block. The first difference is explained in terms of the classic bugs: a leak on free, a
missing copy-on-write, a shared partial block, blocks merged across different prefixes, a block filled
by ``append_token`` that never gets its key, a failed call that keeps the blocks it took. Programs also
allocate prompts that continue a live sequence, decoded tokens included, so that a decoded block can be
found by key.
"""

from __future__ import annotations

import numbers

from ringlab.serving import BlockManager, OutOfBlocksError

from ..engine import CaseFailure, run_grader
from ..exercise import Exercise


def _decoded(seq, position: int) -> int:
    """A token no other sequence decodes (so decoding never recreates another sequence's full block).

    ``position`` counts the sequence's tokens at its creation plus every append_token issued on it, failed
    ones too: a value is never reused at another place, so a drawn prompt that copies a sequence whose
    append failed cannot meet that sequence's later tokens at the same position."""
    return 100_000 + 1_000 * seq + position


def alloc_cases() -> list[dict]:
    """Fixed programs, one per classic bug, then card 14's numbers."""
    prompt = list(range(1_000))
    return [
        dict(num_blocks=8, block_size=4, ops=[("allocate", 0, [1, 2, 3, 4, 5]), ("free", 0),
                                             ("allocate", 1, [9] * 8), ("allocate", 2, [7] * 12)]),
        dict(num_blocks=16, block_size=4, ops=[("allocate", 0, [1, 2, 3, 4, 5, 6]), ("fork", 0, 1),
                                              ("append", 0), ("append", 1), ("append", 1)]),
        dict(num_blocks=16, block_size=4, ops=[("allocate", 0, [1, 2, 3]), ("allocate", 1, [1, 2, 3])]),
        dict(num_blocks=16, block_size=4, ops=[("allocate", 0, [1, 2, 3, 4, 9, 9, 9, 9]),
                                              ("allocate", 1, [5, 6, 7, 8, 9, 9, 9, 9])]),
        dict(num_blocks=16, block_size=4, ops=[("allocate", 0, [1, 2, 3, 4, 5, 6, 7, 8, 1]),
                                              ("allocate", 1, [1, 2, 3, 4, 5, 6, 7, 8, 2]), ("free", 0),
                                              ("allocate", 2, [1, 2, 3, 4, 0])]),
        dict(num_blocks=16, block_size=4, ops=[("allocate", 0, [1, 2]), ("fork", 0, 1), ("free", 0),
                                              ("append", 1), ("allocate", 2, [3] * 40)]),
        dict(num_blocks=4, block_size=2, ops=[("allocate", 0, [1, 2, 3]), ("append", 0), ("append", 0),
                                             ("allocate", 1, [5, 6, 7]), ("free", 0), ("allocate", 1, [5, 6, 7])]),
        dict(num_blocks=8, block_size=4, ops=[("allocate", 0, [1, 2, 3]), ("append", 0),
                                             ("allocate", 1, [1, 2, 3, _decoded(0, 3), 7])]),
        dict(num_blocks=3, block_size=2, ops=[("allocate", 0, [1, 2]), ("allocate", 1, [1, 2, 3, 4, 5, 6, 7])]),
        dict(num_blocks=7_680, block_size=16, ops=[("allocate", i, prompt) for i in range(100)]),
    ]


def alloc_strategy():
    from hypothesis import strategies as st

    @st.composite
    def program(draw):
        block_size = draw(st.integers(1, 4))
        num_blocks = draw(st.integers(2, 16))
        ops, live, next_id, tokens = [], [], 0, {}  # tokens: what each sequence holds if every call succeeds
        for _ in range(draw(st.integers(1, 14))):
            kind = draw(st.sampled_from(["allocate", "continue", "append", "fork", "free"] if live else ["allocate"]))
            if kind in ("allocate", "continue"):
                prompt = draw(st.lists(st.integers(0, 1), min_size=1 if kind == "allocate" else 0, max_size=9))
                if kind == "continue":  # a new prompt that starts with a live sequence's tokens, decoded ones too
                    prompt = tokens[draw(st.sampled_from(live))] + prompt
                ops.append(("allocate", next_id, prompt))
                tokens[next_id] = list(prompt)
                live.append(next_id)
                next_id += 1
            elif kind == "fork":
                parent = draw(st.sampled_from(live))
                ops.append(("fork", parent, next_id))
                tokens[next_id] = list(tokens[parent])
                live.append(next_id)
                next_id += 1
            else:
                seq = draw(st.sampled_from(live))
                ops.append((kind, seq))
                if kind == "free":
                    live.remove(seq)
                else:
                    tokens[seq].append(_decoded(seq, len(tokens[seq])))
        return dict(num_blocks=num_blocks, block_size=block_size, ops=ops)

    return program()


def _shares(tables: dict) -> dict:
    """(seq, index) -> the set of (seq, index) holding the same physical block."""
    holders: dict = {}
    for seq, table in tables.items():
        for i, block in enumerate(table):
            holders.setdefault(block, set()).add((seq, i))
    return {place: group for group in holders.values() for place in group}


def _call(alloc, op, issued):
    kind, seq = op[0], op[1]
    if kind == "allocate":
        return alloc.allocate(seq, list(op[2]))
    if kind == "append":
        return alloc.append_token(seq, _decoded(seq, issued[seq]))
    if kind == "fork":
        return alloc.fork(seq, op[2])
    return alloc.free(seq)


def _describe_op(op) -> str:
    kind, seq = op[0], op[1]
    if kind == "allocate":
        tokens = op[2] if len(op[2]) <= 12 else f"{len(op[2])} tokens"
        return f"allocate({seq}, {tokens})"
    if kind == "fork":
        return f"fork({seq}, {op[2]})"
    return f"{'append_token' if kind == 'append' else kind}({seq}{', <token>' if kind == 'append' else ''})"


def _why_shared(place, other, lengths, tokens, block_size) -> str:
    """Explain why two (sequence, index) places must not be one physical block."""
    (a, i), (b, j) = place, other
    seen_a = tokens[a][:min(lengths[a], (i + 1) * block_size)]  # a block's KV depends on its whole prefix
    seen_b = tokens[b][:min(lengths[b], (j + 1) * block_size)]
    if seen_a == seen_b:
        return (f"block {i} of sequences {a} and {b} is one physical block, but it is a partial block: never share "
                f"a block by key before it is full (its content is still changing)")
    if seen_a[i * block_size:] == seen_b[j * block_size:]:
        return (f"block {i} of sequence {a} and block {j} of sequence {b} hold the same tokens after different "
                f"prefixes, and you merged them: the key of a block must chain the key of the block before it")
    return (f"sequences {a} and {b} share block {i}, but their tokens up to its end differ: after a fork, "
            f"the first write into a shared block must copy it (copy-on-write), or one corrupts the other")


def check_allocator(cls, num_blocks: int, block_size: int, ops: list) -> None:
    ref = BlockManager(num_blocks, block_size)
    mine = cls(num_blocks, block_size)
    lengths, tokens, prompts = {}, {}, {}  # prompts: tokens a sequence got by allocate (or its parent's, by fork)
    issued = {}  # per sequence: tokens at creation + append_token calls made, for _decoded
    for step, op in enumerate(ops):
        where = f"after {_describe_op(op)} (call {step + 1} of {len(ops)})"
        seq = op[1]
        if op[0] != "allocate" and seq not in lengths:
            continue  # the sequence was never admitted (the pool was full)
        free_before = ref.num_free_blocks
        try:
            _call(ref, op, issued)
            ref_error = None
        except OutOfBlocksError as exc:
            ref_error = exc
        try:
            _call(mine, op, issued)
            my_error = None
        except OutOfBlocksError as exc:
            my_error = exc
        if ref_error and not my_error:
            raise CaseFailure(f"{where}: the pool has {ref.num_free_blocks} free blocks and this needs "
                              f"{ref_error.needed}; raise OutOfBlocksError (and change nothing)")
        if my_error and not ref_error:
            raise CaseFailure(f"{where}: you raised OutOfBlocksError, but the {free_before} free blocks were enough: "
                              f"blocks found by key cost nothing, and only a partial block is never shared")
        if my_error and mine.num_free_blocks != free_before:
            raise CaseFailure(f"{where}: you raised OutOfBlocksError (right: {ref_error.needed} blocks needed, "
                              f"{free_before} free) but num_free_blocks went from {free_before} to "
                              f"{mine.num_free_blocks}: a call that fails must change nothing, so count the blocks "
                              f"it needs before taking any (or give back the ones taken)")
        if not ref_error:
            if op[0] == "allocate":
                tokens[seq], lengths[seq], prompts[seq] = list(op[2]), len(op[2]), len(op[2])
                issued[seq] = len(op[2])
            elif op[0] == "append":
                tokens[seq].append(_decoded(seq, issued[seq]))
                lengths[seq] += 1
            elif op[0] == "fork":
                tokens[op[2]], lengths[op[2]], prompts[op[2]] = list(tokens[seq]), lengths[seq], prompts[seq]
                issued[op[2]] = lengths[seq]
            else:
                del tokens[seq], lengths[seq], prompts[seq]
        if op[0] == "append":
            issued[seq] += 1
        _compare(ref, mine, where, op, lengths, tokens, prompts, block_size, num_blocks)


def _compare(ref, mine, where, op, lengths, tokens, prompts, block_size, num_blocks) -> None:
    mine_tables = {}
    for seq in lengths:
        table = mine.block_table(seq)
        if not isinstance(table, (list, tuple)) or not all(
                isinstance(b, numbers.Integral) and 0 <= b < num_blocks for b in table):
            raise CaseFailure(f"{where}: block_table({seq}) must be a list of block ids in 0..{num_blocks - 1}, "
                              f"got {table!r}")
        want = -(-lengths[seq] // block_size)
        if len(table) != want:
            raise CaseFailure(f"{where}: sequence {seq} holds {lengths[seq]} tokens in {len(table)} blocks; "
                              f"ceil({lengths[seq]} / {block_size}) = {want}")
        mine_tables[seq] = [int(b) for b in table]
    ref_share = _shares({s: ref.block_table(s) for s in lengths})
    my_share = _shares(mine_tables)
    for place in sorted(ref_share):
        extra, missing = my_share[place] - ref_share[place], ref_share[place] - my_share[place]
        if extra:
            other = sorted(extra)[0]
            raise CaseFailure(f"{where}: " + _why_shared(place, other, lengths, tokens, block_size))
        if missing:
            other = sorted(missing)[0]
            decoded = [s for s, i in (place, other) if (i + 1) * block_size > prompts[s]]
            if op[0] == "allocate" and decoded:
                raise CaseFailure(f"{where}: block {place[1]} of sequences {place[0]} and {other[0]} should be one "
                                  f"physical block: sequence {decoded[0]} filled it with append_token, and a block "
                                  f"that decoding fills gets its chain key then and becomes shareable like a prompt "
                                  f"block; you hold two")
            raise CaseFailure(f"{where}: block {place[1]} of sequences {place[0]} and {other[0]} should be one "
                              f"physical block (equal prefix of full blocks, or a fork not yet written), but you "
                              f"hold two")
    used = len({b for t in mine_tables.values() for b in t})
    free = mine.num_free_blocks
    if free != ref.num_free_blocks:
        if free < ref.num_free_blocks:
            hint = ("blocks were not returned to the pool: a leak (free must give back every block whose "
                    "reference count drops to 0)" if op[0] == "free" else "you took more blocks than needed")
        else:
            hint = ("you returned a block another sequence still holds: count references per block"
                    if op[0] == "free" else "you took fewer blocks than needed")
        raise CaseFailure(f"{where}: num_free_blocks is {free}, expected {ref.num_free_blocks}: {hint}")
    if used + free != num_blocks:
        raise CaseFailure(f"{where}: your tables hold {used} distinct blocks and {free} are free, but the pool "
                          f"has {num_blocks}: blocks leaked (neither held nor free)")


def _alloc(fn):
    return run_grader("14a", "BlockAllocator", fn, check_allocator, alloc_cases(), alloc_strategy(),
                      "free counts and block sharing match after every call: prefix sharing by chained keys of "
                      "full blocks, copy-on-write after forks, no leak")


EXERCISES = (
    Exercise("14a", "BlockAllocator", "A paged KV block allocator with prefix sharing",
             _alloc, (
                 "Keep a reference count per block and a table per sequence. A block goes back to the free list "
                 "only when its count reaches 0; fork adds 1 to every block of the parent.",
                 "Key a full block by (key of the previous block, its tokens), so a key covers the whole prefix; "
                 "look keys up before taking fresh blocks, and never key the last, partial block.",
                 "append_token: at a block boundary take a new block; otherwise, if the last block's count is "
                 "above 1, take a new block for this sequence and decrement the shared one (copy-on-write).",
             )),
)
