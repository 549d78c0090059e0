"""The widely copied ring reduce-scatter (P9): every step sends the ORIGINAL chunk, never a partial sum, and
adds what arrives only when its index equals the rank. Right at N = 2; from N = 3 each chunk misses the data
of N - 2 ranks. Its byte count is right, so only the values give it away. It is the version notebook 03 runs."""

# words the grader's first failure message must contain
EXPECT = ["world_size=3", "rank", "expected", "sum over all 3 ranks"]
from ringlab.dist.demos import widely_copied_reduce_scatter as ring_reduce_scatter_p2p  # noqa: E402,F401
