"""10a : given every rank's fingerprint of the collective it is about to run, say who differs in what.

A fingerprint is a dict ``{"seq", "op", "shape", "dtype", "device"}``, as
``ringlab.labs.mismatch.CollectiveGuard`` exchanges before each collective.
Grade it: ``ringlab check 10a``.
"""

FIELDS = ("seq", "op", "shape", "dtype", "device")


def diff_fingerprints(fingerprints):
    """Which ranks differ from the others, and in which fields.

    Args:
        fingerprints: list of dicts, one per rank in rank order, each with the keys of
            :data:`FIELDS`: ``seq`` int, ``op`` str (``"ALLREDUCE"``, ``"BROADCAST"``, ``"BARRIER"``...),
            ``shape`` tuple of ints or None, ``dtype`` str or None, ``device`` str or None.

    Returns:
        dict ``{rank: [field, ...]}``, fields in :data:`FIELDS` order, for each rank whose value
        in some field is not that field's reference value; ``{}`` when all ranks agree.
        The reference value of a field is the value most ranks hold; if several values are held
        by equally many ranks, the one held by the lowest rank among them.
    """
    raise NotImplementedError("10a: replace this line with your code")
