"""``ringlab topic``: every artifact of a topic, found from its number (or slug, or an old id).

    ringlab topic            the topics in the recommended order: number, slug, minutes, prerequisites
    ringlab topic 05         topic 05's notebook, exercises, solution, card, grader, modules, tests, marker
"""

from __future__ import annotations

from ringlab import cli_args, textfmt
from ringlab.course import RECOMMENDED_ORDER, Topic, get_topic


def describe(topic: Topic) -> str:
    """The lines ``ringlab topic NN`` prints: one artifact per line, paths relative to the project root."""
    exercises = ", ".join(f"{ex.id} {ex.function}()" for ex in topic.exercises if not ex.file) or "none"
    rows = [
        ("title", topic.title),
        ("teaches", topic.teaches),
        ("notebook", topic.notebook),
        ("exercises", f"{topic.exercise_file}: {exercises}"),
        *((f"exercise {ex.id}", f"{ex.file}: {ex.function} (solution {ex.solution_file})")
          for ex in topic.exercises if ex.file),
        ("solution", topic.solution_file),
        ("card", f"{topic.card_file} (ringlab practice {topic.card})"),
        ("grader", topic.grader_module),
        ("implements", ", ".join(topic.implements) or "-"),
        ("draws", ", ".join(topic.draws) or "-"),
        ("tests", ", ".join(topic.tests)),
        ("run tests", f"pytest -m {topic.marker}"),
        ("after", ", ".join(topic.prerequisites) or "no prerequisites"),
        ("time", f"about {topic.minutes} min"),
        ("needs", ", ".join(topic.needs) or "numpy only"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join([f"topic {topic.id} {topic.slug}"]
                     + [textfmt.wrap(v, f"  {k:<{width}}  ", first_line_only=True) for k, v in rows])


def main(argv: list[str]) -> int:
    parser = cli_args.ArgumentParser(prog="ringlab topic", description=__doc__.splitlines()[0])
    parser.add_argument("topic", nargs="?", type=cli_args.text(max_len=64),
                        help="a topic number (05), slug (kv_cache), exercise id (05a) or old id (ex08, P5)")
    args = parser.parse_args(argv)
    if args.topic is None:
        topics = [get_topic(topic_id) for topic_id in RECOMMENDED_ORDER]
        print("\n".join(textfmt.table(["id", "slug", "min", "after", "title"],
                                     [[t.id, t.slug, f"~{t.minutes}", ", ".join(t.prerequisites) or "-", t.title]
                                      for t in topics], align="llrll")))
        print("\nrun 'ringlab topic 05' for one topic's files")
        return 0
    try:
        topic = get_topic(args.topic)
    except ValueError as exc:
        parser.error(str(exc))
    print(describe(topic))
    return 0
