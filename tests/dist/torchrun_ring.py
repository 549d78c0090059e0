"""Run by test_dist_launch under torchrun: env:// rendezvous, ring all-reduce vs dist.all_reduce."""

import torch
import torch.distributed as dist

from ringlab.dist import run_ring_all_reduce

if __name__ == "__main__":
    dist.init_process_group("gloo")  # env:// from torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    rank = dist.get_rank()
    x = torch.arange(9, dtype=torch.float32) * (rank + 1)  # 9 elements over 2 ranks: chunks of 5 and 4
    res = run_ring_all_reduce(x)
    expected = x.clone()
    dist.all_reduce(expected)
    ok = torch.equal(res.output, expected)
    print(f"rank {rank} {'ok' if ok else 'WRONG'} {res.bytes_sent} {res.bytes_received}", flush=True)
    dist.destroy_process_group()
