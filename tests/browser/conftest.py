"""Fixtures for the browser tests: one JupyterLab server and one headless Chromium per session.

Both are torn down by finalizers, so a failing test still stops the server (its whole process
group and its kernels) and the browser. Chromium is Debian's (``/usr/bin/chromium``, or
``$RINGLAB_CHROMIUM``); Playwright never downloads a browser here.
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


def pytest_configure(config):
    config.addinivalue_line("markers", "browser: drives JupyterLab in headless Chromium (slow; "
                                       "`-m 'not browser'` leaves these out)")


def pytest_collection_modifyitems(config, items):
    """Mark every test in this folder ``browser``."""
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.browser)


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
    """A JupyterLab server on 127.0.0.1 serving a temporary copy of notebooks/ (see labserver.py)."""
    server = start_lab(tmp_path_factory.mktemp("jupyterlab"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def browser(chromium_executable):
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
