"""Fixtures for the browser tests: ONE JupyterLab server for the whole session, one headless Chromium per module.

Starting JupyterLab costs 5-15 s on a busy 2-core machine, so every browser test shares one server. It serves a
temporary copy of the course the way ``make lab`` serves the checkout (``labserver.start_lab(course=True)``: the
copy's root, with ``notebooks/``, ``exercises/``, ``solutions/`` and ``tests/fixtures/nccl/``), with Jupyter's
folders and the practice record (``XDG_STATE_HOME``) beside the copy, never the user's.

Fixtures for a new browser test (e.g. a test of notebook NN):

- ``lab``: the shared server. ``lab.url`` (no trailing slash), ``lab.root`` (the served copy),
  ``lab.notebooks`` (its ``notebooks/``). Open a notebook with a path relative to the root:
  ``check_explorers(page, lab.url, lab.root, "notebooks/NN_slug.ipynb")`` or ``run_clean(...)`` (labpage.py).
- ``page``: a fresh browser context and page (1280 x 860, 30 s default timeout); afterwards every kernel is shut
  down so the next test has the CPU.
- ``fresh_lab``: the shared server reset to a fresh clone's state before the test and again after it
  (``LabServer.reset_learner_state``: notebooks, exercises and solutions copied again, no practice record, no
  saved workspaces). Use it instead of ``lab`` when the test edits files or records progress, or asserts that
  nothing has been done yet; name it before ``page`` (``def test_x(fresh_lab, page)``) so that the reset after the
  test comes once its page is closed.
- ``browser`` (the Chromium instance, per test module: see its docstring; for tests that make their own
  contexts) and ``artifacts`` (the folder
  for screenshots, test-artifacts/browser/).

All are torn down by finalizers, so a failing test still stops the server (its whole process group and its
kernels) and the browser. Every test in this folder is marked ``browser`` (and ``slow``). Chromium is Debian's
(``/usr/bin/chromium``, or ``$RINGLAB_CHROMIUM``); Playwright never downloads a browser here.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from labserver import ROOT, start_lab

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-quic", "--no-first-run", "--disable-component-update", "--disable-sync"]
ARTIFACTS = ROOT / "test-artifacts" / "browser"
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    """Mark every test in this folder ``browser`` and ``slow`` (markers registered in pyproject.toml)."""
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)


def chromium_path() -> str | None:
    wanted = os.environ.get("RINGLAB_CHROMIUM", "/usr/bin/chromium")
    return wanted if Path(wanted).is_file() else shutil.which("chromium")


@pytest.fixture(scope="session")
def chromium_executable() -> str:
    path = chromium_path()
    if path is None:
        pytest.skip("Chromium is not installed (looked for $RINGLAB_CHROMIUM, /usr/bin/chromium and chromium on "
                    "PATH); install it with `apt-get install chromium`, as .ci/run does")
    return path


@pytest.fixture(scope="session")
def lab(chromium_executable, tmp_path_factory):
    """The one JupyterLab server of the session, on 127.0.0.1, serving a temporary copy of the course as ``make lab``
    serves the checkout (module docstring; labserver.py)."""
    server = start_lab(tmp_path_factory.mktemp("jupyterlab"), course=True)
    yield server
    server.stop()


@pytest.fixture
def fresh_lab(lab):
    """The shared server as a fresh clone would give it, for a test that edits or records: reset before and after."""
    lab.reset_learner_state()
    yield lab
    lab.reset_learner_state()


@pytest.fixture(scope="module")
def browser(chromium_executable):
    """Chromium under Playwright's sync API, one per test module. Not per session: while the sync API is started
    it keeps an event loop marked running in the main thread, so every later ``asyncio.run()`` in the same
    pytest process (tests/shards, the topic-19 graders) would fail with "cannot be called from a running event
    loop"."""
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(executable_path=chromium_executable, headless=True,
                                              args=CHROMIUM_ARGS)
    except BaseException:
        playwright.stop()
        raise
    yield chromium
    chromium.close()
    playwright.stop()


@pytest.fixture
def page(browser, lab):
    """A fresh page; afterwards its kernels are shut down so the next notebook has the CPU."""
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    context.set_default_timeout(30_000)
    yield context.new_page()
    context.close()
    lab.shutdown_kernels()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
