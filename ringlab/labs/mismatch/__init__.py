"""Mismatched collectives (topic 10): reproduce them on real processes, read torch's report, guard against them.

A collective is only correct when every rank of the group calls the same operation on
tensors of the same shape and dtype, in the same order. When one rank calls ``broadcast``
while the others call ``all_reduce``, nothing in the call itself notices: each rank posts the
sends and receives of *its* algorithm and waits for messages its peers never send.

Measured here (torch 2.13 CPU, gloo, 4 processes; :func:`run_scenarios` measures it again on
your machine rather than trusting this text):

* plain: every rank blocks until the group's timeout, then gloo raises ``Timed out waiting
  ... for recv/send operation`` (or, on the ranks whose peer timed out first, ``Connection
  closed by peer``). No values come back, right or wrong. Rank 3 skipping a barrier that the
  others call, then joining the next ``all_reduce``: the same hang.
* ``TORCH_DISTRIBUTED_DEBUG=DETAIL``: torch wraps the group in a checker that runs a monitored
  barrier and compares a ``CollectiveFingerPrint`` (SequenceNumber, OpType, TensorShape,
  TensorDtypes, TensorDeviceTypes) before each collective, so every rank fails at once with
  ``Detected mismatch between collectives on ranks``; each rank names itself and one
  other rank, not the whole picture.
* :class:`CollectiveGuard`: the same idea done in Python on a separate gloo group: every rank
  raises :class:`CollectiveMismatchError` naming every differing rank and field.

Fingerprint fields follow torch's ``CollectiveFingerPrint`` (``torch/csrc/distributed/c10d/
ProcessGroupWrapper.cpp``) and op names its ``OpType`` enum (``ALLREDUCE``, ``BROADCAST``, ...).
Importing this module does not import torch; the functions that need it do
(``pip install 'ringlab[torch]'``).

Modules, the pure part first: :mod:`~ringlab.labs.mismatch.fingerprint` (fingerprints and their
comparison, the exercise's subject), :mod:`~ringlab.labs.mismatch.guard` (:class:`CollectiveGuard`),
:mod:`~ringlab.labs.mismatch.scenarios` (the reproducer on real processes). Everything is importable
from ``ringlab.labs.mismatch`` itself, as before the split.
"""

from .fingerprint import FIELDS, OPS, CollectiveMismatchError, Fingerprint, compare_fingerprints, describe_mismatch
from .guard import CollectiveGuard, CollectiveTimeoutError
from .scenarios import MODES, SCENARIOS, RankOutcome, default_odd_rank, outcome_table, reproduce, run_scenarios

__all__ = [
    "FIELDS", "MODES", "OPS", "SCENARIOS", "CollectiveGuard", "CollectiveMismatchError", "CollectiveTimeoutError",
    "Fingerprint", "RankOutcome", "compare_fingerprints", "default_odd_rank", "describe_mismatch", "outcome_table",
    "reproduce", "run_scenarios",
]
