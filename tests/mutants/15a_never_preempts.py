"""A request that finds no free block just waits: nobody is preempted, so when every running request
needs a block at once the batch stops for good."""

EXPECT = ["preempted nobody"]


def plan_step(running, waiting, free_blocks, watermark_blocks=0):
    free, decode = free_blocks, []
    for request in running:
        if request["needs_block"]:
            if free == 0:
                continue
            free -= 1
        decode.append(request["id"])
    admit = []
    for request in waiting:
        if request["blocks"] + 1 > free - watermark_blocks:
            break
        admit.append(request["id"])
        free -= request["blocks"]
    return {"decode": decode, "preempt": [], "admit": admit}
