"""The course: the topic registry (data) from which every topic's artifacts are found by number."""

from .registry import (RECOMMENDED_ORDER, TOPICS, ExerciseRef, Topic, exercise_refs, get_topic, resolve_card,
                       resolve_exercise, topic_ids, topic_of_exercise)

__all__ = ["RECOMMENDED_ORDER", "TOPICS", "ExerciseRef", "Topic", "exercise_refs", "get_topic", "resolve_card",
           "resolve_exercise", "topic_ids", "topic_of_exercise"]
