"""16a : read an NCCL log: name the transport and say whether the run is healthy.

Grade it: ``ringlab check 16a`` or, in a notebook, ``ringlab.check.grade("16a")``.
Hints: ``ringlab.check.hint("16a", 1)`` (2 and 3 say more).

The input is what a learner pastes: nccl-tests output run with ``NCCL_DEBUG=INFO``, its NCCL lines
(``host:pid:tid [dev] NCCL INFO ...``) mixed with the result table. Only the standard library is needed.
"""

import re


def diagnose(log):
    """Name the transport that carries the run's traffic and say whether the run is healthy.

    Args:
        log: str, the pasted text (NCCL_DEBUG=INFO lines and nccl-tests rows, any order).

    Which transport: when the communicator spans more than one node (``nNodes K`` with K > 1 in the
    ``comm 0x... rank R nRanks N nNodes K localRanks L`` line), the one of the connections between
    nodes (``... via NET/<name>/...``), else the one between GPUs of the node. Name it as:

    * ``"P2P"`` for ``via P2P/...`` (NVLink or PCIe peer-to-peer), ``"SHM"`` for ``via SHM/...``;
    * ``"IB"`` for ``via NET/IB/...`` (InfiniBand or RoCE: NCCL's verbs transport),
      ``"Socket"`` for ``via NET/Socket/...`` (TCP), ``"EFA"`` for ``via NET/AWS Libfabric/...`` or
      ``via NET/Libfabric/...`` (aws-ofi-nccl).

    Healthy means all three of:

    * every result row reports ``#wrong`` 0 (or ``N/A``) in both halves: a row's ``#wrong`` values are
      its 9th and 13th fields (size count type redop root time algbw busbw #wrong time algbw busbw #wrong);
    * a multi-node run does not fall back to ``Socket``, and its ``IB``/``EFA`` connections end in
      ``/GDRDMA`` (without it every byte is staged through host memory);
    * a single-node run does not use ``SHM`` (peer-to-peer disabled or unavailable).

    Returns:
        ``{"transport": str, "healthy": bool}``. Raises ValueError when no ``via`` line names a
        transport for the path that matters.
    """
    raise NotImplementedError("16a: replace this line with your code")
