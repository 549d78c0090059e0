import os

from hypothesis import HealthCheck, settings

# CI machines are small and shared; deadlines would make property tests flaky, not stricter.
settings.register_profile("ringlab", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ringlab"))


def pytest_configure(config):
    """One marker per topic, named by its slug: ``pytest -m kv_cache`` runs topic 05's tests."""
    from ringlab.course import TOPICS

    for topic in TOPICS:
        config.addinivalue_line("markers", f"{topic.marker}: tests of topic {topic.id} ({topic.title})")


def pytest_collection_modifyitems(config, items):
    """Mark each test with the topics whose registry entry lists its file or a folder above it."""
    from pathlib import Path

    import pytest

    from ringlab.course import TOPICS

    root = Path(__file__).resolve().parents[1]
    owners = [(root / path, pytest.mark.__getattr__(topic.marker)) for topic in TOPICS for path in topic.tests]
    for item in items:
        path = Path(str(item.path)).resolve()
        for owned, mark in owners:
            if path == owned or owned in path.parents:
                item.add_marker(mark)


def pytest_addoption(parser):
    parser.addoption("--hogs", type=int, default=int(os.environ.get("RINGLAB_TEST_HOGS", "0") or 0),
                     help="start N busy processes that hog the CPUs for the whole session (default "
                          "$RINGLAB_TEST_HOGS or 0): the tests must pass on a busy machine")


def pytest_sessionstart(session):
    """With ``--hogs N`` (or RINGLAB_TEST_HOGS=N), N processes spin at 100% CPU until the session ends."""
    import subprocess
    import sys

    count = session.config.getoption("--hogs")
    if not 0 <= count <= 64:
        raise ValueError(f"--hogs must be in 0..64, got {count}")
    session.config._ringlab_hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
        for _ in range(count)]


def pytest_sessionfinish(session):
    for hog in getattr(session.config, "_ringlab_hogs", []):
        hog.kill()
        hog.wait()


def pytest_report_header(config):
    count = config.getoption("--hogs")
    return f"ringlab: {count} CPU hog process(es) running for the whole session" if count else None
