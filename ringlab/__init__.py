"""ringlab: ring all-reduce and the arithmetic of distributed training and LLM serving.

The public face stays light: importing ringlab loads numpy and ml_dtypes only. torch,
matplotlib and ipywidgets are imported by the functions that need them.
"""

from ringlab.sim import CollectiveResult, Traffic, all_gather, reduce_scatter, ring_allreduce
from ringlab.sim.verify import verify

__version__ = "0.1.0"

__all__ = ["CollectiveResult", "Traffic", "all_gather", "reduce_scatter", "ring_allreduce", "verify", "__version__"]
