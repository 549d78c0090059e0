"""Clusters: NVLink domains, NICs on rails, NVLS and SHARP; routing, bytes per link, time (pure numpy).

``get_cluster(name, nodes)``         a preset (:data:`PRESETS`, each with its source) with ``nodes`` nodes
``custom_cluster(...)``              a cluster from plain numbers
``Cluster.route(src, dst)``          the links each transfer crosses
``build_on_cluster(coll, algo, c)``  a topology-aware schedule (:data:`CLUSTER_ALGORITHMS`) or a flat one
``link_loads(schedule, c, numel)``   bytes per link and per-step busiest link, counted from the schedule
``cost_of(schedule, c, nbytes)``     step-model time, busbw, line-rate ceiling, bottleneck, bytes per class
``scale.cluster_costs(coll, c, n)``  the same for every algorithm at any size: ring rules where schedules are too big

Imports :mod:`ringlab.collectives` only (the layering: topology sits above collectives, below sim).
"""

from .algorithms import (
    CLUSTER_ALGORITHMS,
    ClusterAlgorithm,
    build_on_cluster,
    closed_form_link_bytes,
    cluster_algorithms_for,
    cluster_schedules,
    default_channels,
    get_cluster_algorithm,
)
from .cluster import FABRICS, LINK_CLASSES, Cluster, LinkTable
from .presets import PRESETS, custom_cluster, get_cluster
from .schedules import ClusterSchedule
from .timing import PROTOCOLS, ClusterCost, cost_of, linear_time, protocol_efficiency
from .traffic import LinkCounter, LinkLoads, class_bytes, link_loads, route_bytes

__all__ = ["CLUSTER_ALGORITHMS", "Cluster", "ClusterAlgorithm", "ClusterCost", "ClusterSchedule", "FABRICS",
           "LINK_CLASSES", "LinkCounter", "LinkLoads", "LinkTable", "PRESETS", "PROTOCOLS", "build_on_cluster",
           "class_bytes", "closed_form_link_bytes", "cluster_algorithms_for", "cluster_schedules", "cost_of",
           "custom_cluster", "default_channels", "get_cluster", "get_cluster_algorithm", "link_loads", "linear_time",
           "protocol_efficiency", "route_bytes"]
