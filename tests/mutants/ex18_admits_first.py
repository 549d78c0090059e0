"""Admits before the running requests grow: the livelock order of PROBLEMS.md P14 (decode room is
reserved for the newcomer, but the blocks the running requests need this step are handed out first)."""

EXPECT = ["admitted request", "grow before anyone is admitted"]


def plan_step(running, waiting, free_blocks, watermark_blocks=0):
    free, admit = free_blocks, []
    for request in waiting:
        if request["blocks"] + 1 > free - watermark_blocks:
            break
        admit.append(request["id"])
        free -= request["blocks"]
    alive, decode, preempt = list(running), [], []
    for request in list(alive):
        if request not in alive:
            continue
        if request["needs_block"]:
            while free == 0:
                victim = alive.pop()
                preempt.append(victim["id"])
                free += victim["blocks"]
                if victim is request:
                    break
            if request not in alive:
                continue
            free -= 1
        decode.append(request["id"])
    return {"decode": decode, "preempt": preempt, "admit": admit}
