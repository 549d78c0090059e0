"""08a : the pipeline bubble of GPipe, 1F1B and interleaved 1F1B, in both conventions.

Grade it: ``ringlab check 08a`` or, in a notebook, ``ringlab.check.grade("08a")``.
Hints: ``ringlab.check.hint("08a", 1)`` (2 and 3 say more).
"""


def pipeline_bubble(stages, microbatches, schedule, virtual_stages=1, relative_to="ideal"):
    """Idle time of a pipeline step as a fraction, assuming every stage takes the same time.

    Args:
        stages: pipeline stages P (devices), int >= 1.
        microbatches: micro-batches per optimizer step M, int >= 1 (a multiple of P for
            interleaved-1f1b, as Megatron-LM requires).
        schedule: ``"gpipe"``, ``"1f1b"`` or ``"interleaved-1f1b"``.
        virtual_stages: model chunks per device v for interleaved-1f1b; gpipe and 1f1b have no model
            chunks and ignore it.
        relative_to: ``"ideal"`` -> bubble time / ideal compute time (Megatron-LM's convention,
            Narayanan et al. 2021); ``"total"`` -> bubble time / wall-clock time (bubble + compute).

    Returns:
        The fraction, a float (0 when there is one stage).
    """
    raise NotImplementedError("08a: replace this line with your code")
