"""``ringlab cost``: bytes per rank, steps and time of every algorithm of a collective, on one link or a cluster.

Examples: ``ringlab cost --collective all_reduce --world-size 64 --size 1GiB --fabric nvlink4`` (one flat
link, the alpha-beta model of :mod:`ringlab.collectives.cost`); ``ringlab cost --topology dgx-h100
--nodes 2 --size 1GiB`` (every algorithm routed on a cluster: step-model time, busbw, the line-rate
ceiling, the bottleneck link, bytes per link class and the share of traffic that leaves the node;
:mod:`ringlab.topology`; at any size: rings and the hierarchy from ring rules where their schedules are too
large to route, :mod:`ringlab.topology.scale`); add ``--nccl`` for the algorithm, protocol, channels and time NCCL's own tuning
model predicts at each size up to S (:mod:`ringlab.nccl.tuning`; ``--nccl-version``, ``--nccl-env NCCL_PROTO=Simple``).
"""

from __future__ import annotations

import argparse
import sys

from ringlab import cli_args, textfmt
from ringlab.calc.units import format_size, parse_size
from ringlab.collectives import COLLECTIVES
from ringlab.collectives.cost import LARGE_MESSAGE_ALGORITHM, LINKS, Link, cost_table, crossover, get_link, linear_cost
from ringlab.nccl.tuning.sweep import format_sweep, nccl_sweep, parse_env
from ringlab.nccl.tuning.versions import NEWEST as NCCL_NEWEST
from ringlab.nccl.tuning.versions import VERSIONS as NCCL_VERSIONS
from ringlab.topology import FABRICS, PRESETS, PROTOCOLS, custom_cluster, get_cluster
from ringlab.topology.cluster import MAX_LINKS
from ringlab.topology.scale import cluster_costs

GPU_GBS_MIN = 0.1  # GB/s: below a PCIe 1.0 x1 lane (0.25 GB/s); smaller is a unit slip (Gb/s? MB/s?)
NIC_GBPS_MIN = 1.0  # Gb/s: below any NIC sold for a cluster


def build_parser() -> argparse.ArgumentParser:
    p = cli_args.ArgumentParser(prog="ringlab cost", description=__doc__.splitlines()[0])
    p.add_argument("--collective", default="all_reduce", choices=COLLECTIVES)
    p.add_argument("--world-size", type=cli_args.integer(min=1, max=1 << 22), help="number of ranks N (default 64; with --topology, nodes x GPUs)")
    p.add_argument("--size", type=cli_args.size(), default="1GiB",
                   help="message size S as nccl-tests defines it, e.g. 1GiB, 64MB, 4096 (default 1GiB)")
    p.add_argument("--fabric", type=cli_args.text(), help=f"flat link preset: {', '.join(LINKS)} (default nvlink4; "
                   "not with --topology, whose links are the cluster's)")
    p.add_argument("--alpha", type=cli_args.duration(min=0, min_open=False, max=1.0),
                   help="override the preset's latency per step: seconds, or 5us, 2ms")
    p.add_argument("--bandwidth", type=cli_args.bandwidth(),
                   help="override the preset's bandwidth per direction: bytes/s, or 400Gb/s (bits), 50GB/s")
    p.add_argument("--gamma", type=cli_args.real(min=0, max=1.0), default=0.0, help="seconds per byte reduced (default 0)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    c = p.add_argument_group("cluster (ringlab.topology)")
    c.add_argument("--topology", type=cli_args.text(), help=f"cluster preset: {', '.join(PRESETS)}, or custom (with the flags below)")
    c.add_argument("--nodes", type=cli_args.integer(min=1, max=100_000), default=1, help="nodes (NVLink domains) of the cluster (default 1)")
    c.add_argument("--channels", type=cli_args.integer(min=1, max=1024),
                   help="rings / tree pairs NCCL-style, 1 to 1024 (default: one per GPU of a node: 8 on dgx-h100, 72 on "
                        "gb200-nvl72)")
    c.add_argument("--algorithm", type=cli_args.text(), help="only this algorithm (flat or topology-aware)")
    c.add_argument("--protocol", choices=tuple(PROTOCOLS), help="NCCL protocol efficiency (default simple = 1)")
    c.add_argument("--gpus-per-node", type=cli_args.integer(min=1, max=1024), help="custom: GPUs per node")
    c.add_argument("--gpu-gbs", type=cli_args.real(min=0, min_open=True, max=1e5),
                   help=f"custom: GB/s per GPU per direction (per link for --intra mesh), {GPU_GBS_MIN:g} to 100,000")
    c.add_argument("--intra", choices=FABRICS, help="custom: how GPUs in a node connect (default nvswitch)")
    c.add_argument("--nics", type=cli_args.integer(min=0, max=1024), default=0, help="custom: NICs per node")
    c.add_argument("--nic-gbps", type=cli_args.real(min=0, max=1e5), default=0.0,
                   help=f"custom: Gb/s per NIC, as sold (400 for NDR), {NIC_GBPS_MIN:g} to 100,000 (0: no NICs)")
    n = p.add_argument_group("NCCL's tuning model (ringlab.nccl.tuning), with --topology")
    n.add_argument("--nccl", action="store_true", help="per size up to S: the algorithm, protocol, channels and "
                   "time NCCL's own model predicts, beside the line-rate time")
    n.add_argument("--nccl-version", choices=tuple(NCCL_VERSIONS),
                   help=f"the NCCL release whose model to use (default {NCCL_NEWEST})")
    n.add_argument("--nccl-env", action="append", metavar="NAME=VALUE", type=cli_args.text(),
                   help="an NCCL variable the model reads, e.g. NCCL_PROTO=Simple, NCCL_ALGO=Ring, "
                        "NCCL_MAX_NCHANNELS=4, NCCL_NVLS_ENABLE=0 (repeatable)")
    n.add_argument("--compcap", type=cli_args.integer(min=60, max=120),
                   help="custom topologies: the GPUs' compute capability for --nccl (90 for H100)")
    return p


def _format(rows: list[dict], header: str) -> str:
    head = ["algorithm", "bytes/rank (max)", "GB", "GiB", "steps", "time (us)", "busbw GB/s"]
    cells = [[r["algorithm"], f"{r['bytes_per_rank_max']:,}", f"{r['bytes_per_rank_max'] / 1e9:.3f}",
              f"{r['bytes_per_rank_max'] / 2**30:.3f}",
              str(r["steps"]) + ("" if r["latency_terms"] == r["steps"] else f" ({r['latency_terms']} alpha)"),
              f"{r['seconds'] * 1e6:,.1f}", "-" if r["busbw"] is None else f"{r['busbw'] / 1e9:.1f}"]
             for r in rows]
    return "\n".join([textfmt.wrap(header)] + textfmt.table(head, cells, align="lrrrrrr"))


_FLAT_ONLY = ("alpha", "bandwidth")


def _size_text(size: int) -> str:
    """S as exact bytes and in the decimal and binary unit that suit it: 1,073,741,824 B (1.07 GB, 1.00 GiB)."""
    return f"{size:,} B ({format_size(size)}, {format_size(size, binary=True)})" if size >= 1000 else f"{size:,} B"


def _cluster(args):
    if args.topology == "custom":
        if not args.gpus_per_node or not args.gpu_gbs:
            raise ValueError("--topology custom needs --gpus-per-node and --gpu-gbs (and --nics, --nic-gbps for "
                             "more than one node)")
        if args.gpu_gbs < GPU_GBS_MIN:
            raise ValueError(f"--gpu-gbs {args.gpu_gbs:g} is below {GPU_GBS_MIN:g} GB/s; the rate is in GB/s per GPU "
                             "and direction: 450 for NVLink 4")
        if 0 < args.nic_gbps < NIC_GBPS_MIN:
            raise ValueError(f"--nic-gbps {args.nic_gbps:g} is below {NIC_GBPS_MIN:g} Gb/s (0 means no NICs); NICs "
                             "are sold in Gb/s: 400 for NDR")
        cluster = custom_cluster(args.nodes, args.gpus_per_node, args.gpu_gbs * 1e9, nics_per_node=args.nics,
                                 nic_gbps=args.nic_gbps, fabric=args.intra or "nvswitch")
        if cluster.link_count > MAX_LINKS:
            raise ValueError(f"--nodes {args.nodes:,} x --gpus-per-node {args.gpus_per_node:,} ({cluster.fabric}) "
                             f"make {cluster.link_count:,} links, over the limit of {MAX_LINKS:,}")
        return cluster
    if args.intra is not None:
        raise ValueError(f"--intra applies to --topology custom only; {args.topology} has its own in-node fabric")
    for flag in ("gpus_per_node", "gpu_gbs"):
        if getattr(args, flag) is not None:
            raise ValueError(f"--{flag.replace('_', '-')} applies to --topology custom only")
    if args.nics or args.nic_gbps:
        raise ValueError("--nics and --nic-gbps apply to --topology custom only")
    cluster = get_cluster(args.topology, args.nodes)
    if cluster.link_count > MAX_LINKS:
        raise ValueError(f"--nodes {args.nodes:,} of {args.topology} make {cluster.link_count:,} links, over the limit "
                         f"of {MAX_LINKS:,}")
    return cluster


def _cluster_rows(args, cluster, size: int) -> tuple[list[dict], list[tuple[str, str]]]:
    costs, skipped = cluster_costs(args.collective, cluster, size, args.protocol, args.channels,
                                   [args.algorithm] if args.algorithm else None)
    rows = [{"algorithm": c.algorithm, "seconds": c.seconds, "algbw": c.algbw, "busbw": c.busbw, "steps": c.steps,
             "line_rate_seconds": c.line_rate_seconds, "line_rate_busbw": c.line_rate_busbw,
             "bottleneck": c.bottleneck, "bottleneck_class": c.bottleneck_class,
             "bytes_per_link_class": c.bytes_per_class, "inter_node_fraction": c.inter_node_fraction,
             "bytes_moved": c.bytes_moved} for c in costs]
    return rows, skipped


def _format_cluster(rows: list[dict], header: str) -> str:
    def gbs(value):
        return "-" if value is None else f"{value / 1e9:,.1f}"

    timing, traffic = [], []
    for r in rows:
        per = r["bytes_per_link_class"]
        gpu_max = max((per[k]["max"] for k in ("nvlink", "xgmi") if k in per), default=per["pcie"]["max"])
        timing.append([r["algorithm"], f"{r['steps']:,}", f"{r['seconds'] * 1e6:,.1f}", gbs(r["algbw"]),
                       gbs(r["busbw"]), gbs(r["line_rate_busbw"])])
        traffic.append([r["algorithm"], r["bottleneck"] or "-", f"{r['inter_node_fraction']:.1%}",
                        f"{per['nic']['max'] / 1e9:,.3f}" if "nic" in per else "-", f"{gpu_max / 1e9:,.3f}"])
    return "\n".join([textfmt.wrap(header), ""]
                     + textfmt.table(["algorithm", "steps", "time (us)", "algbw GB/s", "busbw GB/s",
                                      "line-rate busbw GB/s"], timing, align="lrrrrr")
                     + ["", "bytes on the busiest links:"]
                     + textfmt.table(["algorithm", "bottleneck link", "leaves node", "NIC GB (max)",
                                      "GPU link GB (max)"], traffic, align="llrrr"))


def _nccl_options(args) -> list[str]:
    """The options of NCCL's model given on the command line besides --nccl itself."""
    return [name for name, value in (("--nccl-version", args.nccl_version), ("--nccl-env", args.nccl_env),
                                     ("--compcap", args.compcap)) if value is not None]


def _main_cluster(parser, args) -> int:
    try:
        for flag in _FLAT_ONLY + ("fabric",):
            if getattr(args, flag) is not None:
                raise ValueError(f"--{flag} sets the flat link; with --topology the cluster's links are used")
        if args.gamma:
            raise ValueError("--gamma applies to the flat alpha-beta model only")
        cluster = _cluster(args)
        if args.world_size is not None and args.world_size != cluster.world_size:
            raise ValueError(f"--world-size {args.world_size} disagrees with {cluster.nodes} node(s) x "
                             f"{cluster.gpus_per_node} GPUs = {cluster.world_size}; leave it out with --topology")
        size = parse_size(args.size)
        rows, skipped = _cluster_rows(args, cluster, size)
        if not rows:  # every algorithm over the limits (or unavailable): nothing to show
            raise ValueError(f"no algorithm runs on --nodes {args.nodes:,} of {cluster.name}: "
                             + "; ".join(f"{n}: {w}" for n, w in skipped[:2]) + ("; ..." if len(skipped) > 2 else ""))
        sweep = None
        if args.nccl:
            best = min(rows, key=lambda r: r["line_rate_seconds"])
            sweep = nccl_sweep(cluster, args.collective, size, args.nccl_version or NCCL_NEWEST,
                               parse_env(args.nccl_env),
                               best["line_rate_seconds"], args.compcap, best["algorithm"])
        elif _nccl_options(args):
            raise ValueError(f"{' and '.join(_nccl_options(args))} need{'s' if len(_nccl_options(args)) == 1 else ''} "
                             "--nccl")
    except (ValueError, TypeError) as exc:
        parser.exit(2, f"ringlab cost: error: {exc}\n")
    if args.json:
        print(cli_args.json_text({"collective": args.collective, "world_size": cluster.world_size, "message_bytes": size,
                          "topology": {"name": cluster.name, "nodes": cluster.nodes,
                                       "gpus_per_node": cluster.gpus_per_node, "fabric": cluster.fabric,
                                       "gpu_bandwidth_Bps": cluster.gpu_bandwidth, "nics_per_node": cluster.nics_per_node,
                                       "nic_gbps": cluster.nic_gbps, "nic_bandwidth_Bps": cluster.nic_bandwidth,
                                       "nvls": cluster.nvls, "sharp": cluster.sharp, "source": cluster.source},
                          "protocol": args.protocol or "simple", "algorithms": rows,
                          "skipped": [{"algorithm": n, "why": w} for n, w in skipped],
                          **({"nccl": sweep.as_dict()} if sweep else {})}))
        return 0
    header = f"{args.collective}, S={_size_text(size)} on {cluster.describe()}"
    print(_format_cluster(rows, header))
    for name, why in skipped:
        print(textfmt.wrap(f"{name}: not run ({why})"))
    if sweep:
        print("\n" + format_sweep(sweep))
    print(textfmt.wrap("model: each step costs its latency plus its busiest link's bytes over that link's bandwidth; "
                       "line-rate busbw: the busiest link of the whole run saturated (the ceiling). See "
                       "ringlab.topology.timing"))
    return 0


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.topology is not None:
        return _main_cluster(parser, args)
    if args.world_size is None:
        args.world_size = 64
    try:
        if args.nccl or _nccl_options(args):
            given = " and ".join((["--nccl"] if args.nccl else []) + _nccl_options(args))
            raise ValueError(f"{given} need{'s' if ' and ' not in given else ''} --topology (NCCL's model runs on a "
                             "cluster's graphs)")
        for flag in ("channels", "algorithm", "protocol", "gpus_per_node", "gpu_gbs", "intra"):
            if getattr(args, flag) is not None:
                raise ValueError(f"--{flag.replace('_', '-')} needs --topology")
        if args.nodes != 1 or args.nics or args.nic_gbps:
            raise ValueError("--nodes, --nics and --nic-gbps need --topology")
        link = get_link(args.fabric or "nvlink4")
        if args.alpha is not None or args.bandwidth is not None:
            link = Link(f"{link.name} (custom)", args.alpha if args.alpha is not None else link.alpha,
                        args.bandwidth if args.bandwidth is not None else link.bandwidth, link.source)
        if args.world_size < 1:
            raise ValueError(f"--world-size must be >= 1, got {args.world_size}")
        size = parse_size(args.size)
        rows = cost_table(args.collective, args.world_size, size, link, args.gamma)
        base = LARGE_MESSAGE_ALGORITHM.get(args.collective)
        cross = crossover(args.collective, link, args.world_size, gamma=args.gamma) if base and len(rows) > 1 else {}
    except (ValueError, TypeError) as exc:
        parser.exit(2, f"ringlab cost: error: {exc}\n")
    if args.json:
        print(cli_args.json_text({"collective": args.collective, "world_size": args.world_size,
                          "message_bytes": size, "fabric": {"name": link.name, "alpha_s": link.alpha, "bandwidth_Bps": link.bandwidth,
                                     "source": link.source},
                          "gamma_s_per_byte": args.gamma, "algorithms": rows,
                          "crossover_bytes": {"against": base, **cross} if cross else None}))
        return 0
    header = (f"{args.collective}, N={args.world_size:,}, S={_size_text(size)}, "
              f"{link.name}: alpha={link.alpha * 1e6:g} us, "
              f"{args.bandwidth.echo() if args.bandwidth is not None else f'{link.bandwidth / 1e9:g} GB/s'} "
              "per direction")
    print(_format(rows, header))
    for name, m in cross.items():
        if linear_cost(args.collective, base, args.world_size, link, args.gamma) == \
                linear_cost(args.collective, name, args.world_size, link, args.gamma):
            print(f"{base} ties with {name}: the same cost at every size in this model")
            continue
        where = ("never" if m is None else "always" if m == 0 else
                 f"above {m:,.0f} B ({format_size(m)})")
        print(textfmt.wrap(f"{base} beats {name}: {where}"))
    print(textfmt.wrap("model: t = steps x alpha + busiest rank's bytes / bandwidth (+ gamma x bytes reduced); "
                       "see ringlab.collectives.cost"))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
