"""One grader module per topic, named by the topic's slug (``kv_cache.py`` grades topic 05's exercises).

Each module defines ``EXERCISES``, a tuple of :class:`~ringlab.check.exercise.Exercise`, for the
exercise ids the topic registry (:mod:`ringlab.course.registry`) lists for that topic.
"""
