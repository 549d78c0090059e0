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
    ### BEGIN SOLUTION
    nodes = 1
    comm = re.search(r"\bnNodes (\d+)", log)
    if comm:
        nodes = int(comm.group(1))
    wrong = 0
    via = []
    for line in log.splitlines():
        fields = line.split()
        if len(fields) == 13 and fields[0].isdigit() and fields[1].isdigit():
            wrong += sum(int(fields[i]) for i in (8, 12) if fields[i] != "N/A")
        match = re.search(r" via (\S+(?: Libfabric)?\S*)", line)
        if match:
            via.append(match.group(1))
    wanted = [v for v in via if v.startswith("NET/")] if nodes > 1 else [v for v in via if not v.startswith("NET/")]
    if not wanted:
        raise ValueError(f"no 'via' line names the {'inter' if nodes > 1 else 'intra'}-node transport")
    path = wanted[0]
    if path.startswith("P2P"):
        transport = "P2P"
    elif path.startswith("SHM"):
        transport = "SHM"
    elif path.startswith("NET/IB"):
        transport = "IB"
    elif path.startswith("NET/Socket"):
        transport = "Socket"
    elif "Libfabric" in path:
        transport = "EFA"
    else:
        raise ValueError(f"unknown transport {path!r}")
    healthy = wrong == 0
    if nodes > 1:
        healthy = healthy and transport != "Socket" and all("/GDRDMA" in v for v in wanted)
    else:
        healthy = healthy and transport != "SHM"
    return {"transport": transport, "healthy": healthy}
    ### END SOLUTION
