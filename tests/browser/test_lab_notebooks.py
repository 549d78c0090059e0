"""Notebooks in a real JupyterLab, in headless Chromium: they run clean and their explorers respond.

Every notebook whose committed outputs hold a widget is run with Run All in the session's shared server
(conftest.py: a copy of the course served as ``make lab`` serves it, notebooks under ``notebooks/``); each
enabled control of each explorer is moved and the figure or text must change. A test double with broken callbacks
proves that the check fails when an explorer does not respond. Screenshots go to
test-artifacts/browser/.
"""

from __future__ import annotations

import json
import re

import nbformat
import pytest

from labpage import check_explorers, committed_widget_notebooks, run_clean
from labserver import ROOT

from ringlab.course import get_topic

WIDGET_NOTEBOOKS = committed_widget_notebooks(ROOT / "notebooks")


def test_some_notebook_has_an_explorer():
    assert WIDGET_NOTEBOOKS, "no committed notebook output holds a widget view"


@pytest.mark.parametrize("path", WIDGET_NOTEBOOKS, ids=lambda p: p.stem)
def test_explorers_respond_in_the_browser(path, page, lab, artifacts):
    report = check_explorers(page, lab.url, lab.root, f"notebooks/{path.name}",
                             screenshot=artifacts / f"{path.stem}.png")
    record_settle_times(report, artifacts / f"{path.stem}_settle.json")
    assert not report.failures, "\n".join(report.failures)
    assert report.moved


def record_settle_times(report, out) -> None:
    """Print and save how long each control change took to settle in the browser (kernel callback, transfer,
    DOM update). A record for the benchmark's numbers, not a verdict: the time depends on the machine, and
    check_explorers already fails a control that changes nothing within its 10 s."""
    out.write_text(json.dumps(report.settle_s, indent=1) + "\n")
    for label, seconds in report.settle_s.items():
        print(f"{out.stem}: {label} settled in {seconds:.2f} s")


def test_start_page_links_every_topic(fresh_lab, page, artifacts):
    """00_start_here runs clean, links every topic notebook, and a link opens its notebook in Lab."""
    lab = fresh_lab  # "not attempted" below: no earlier test's progress (set up before the page, reset after it)
    run_clean(page, lab.url, lab.root, "notebooks/00_start_here.ipynb")
    topics = sorted(p.name for p in lab.notebooks.glob("[0-9][0-9]_*.ipynb") if not p.name.startswith("00_"))
    # Lab rewrites a relative link in an output to /files/notebooks/<name>?_xsrf=... and opens it in Lab on click.
    links = page.locator(".jp-OutputArea-output a")
    hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
    assert sorted(re.search(r"/files/notebooks/([^?/]+)", h).group(1) for h in hrefs) == topics
    assert "not attempted" in page.locator(".jp-OutputArea-output").first.inner_text()
    page.locator(".jp-MarkdownOutput h1").first.scroll_into_view_if_needed()  # the course map, not the last cell
    page.screenshot(path=str(artifacts / "00_start_here.png"))
    first = re.search(r"/files/notebooks/([^?/]+)", hrefs[0]).group(1)
    links.first.click()
    page.wait_for_url(re.compile(f"/tree/notebooks/{re.escape(first)}$"))
    page.locator(".jp-MarkdownOutput h1", has_text=get_topic(first[:2]).title).first.wait_for()


# Explorers built like ringlab's (a slider whose callback writes a caption and redraws a figure into
# an Image): one works, one callback raises, one draws but never updates the Image, one updates the
# caption only.
_DOUBLE = '''import ipywidgets as w
from ringlab.viz._mpl import png_bytes, pyplot

plt = pyplot()


def figure(n):
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.bar(range(n), range(1, n + 1))
    ax.set_title(f"n = {n}")
    return fig


def explorer(name, callback):
    slider = w.IntSlider(value=3, min=1, max=9, description=name)
    caption, image = w.HTML("n = 3"), w.Image(value=png_bytes(figure(3)), format="png")
    slider.observe(lambda change: callback(caption, image, change.new), names="value")
    return w.VBox([slider, caption, image])


def works(caption, image, n):
    caption.value = f"n = {n}"
    image.value = png_bytes(figure(n))


def raises(caption, image, n):
    raise RuntimeError("deliberately broken callback")


def never_updates(caption, image, n):
    png_bytes(figure(n))  # draws, but puts nothing anywhere


def caption_only(caption, image, n):
    caption.value = f"n = {n}"  # the figure stays the old one'''
EXPLORERS = ['explorer("works", works)', 'explorer("raises", raises)', 'explorer("stale", never_updates)',
             'explorer("caption", caption_only)']


def test_the_check_fails_on_broken_callbacks(page, lab):
    name = "notebooks/double_explorers.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells += [nbformat.v4.new_code_cell(src) for src in [_DOUBLE, *EXPLORERS]]
    nbformat.write(nb, lab.root / name)
    report = check_explorers(page, lab.url, lab.root, name)
    assert report.moved == ["explorer 0: slider works (figure)", "explorer 3: slider caption (text)"]
    assert report.failures == [
        f"{name}: moving slider raises did not change the figure or text of explorer 1 within 10 s (broken callback?)",
        f"{name}: no control of explorer 1 redrew its figure",
        f"{name}: moving slider stale did not change the figure or text of explorer 2 within 10 s (broken callback?)",
        f"{name}: no control of explorer 2 redrew its figure",
        f"{name}: no control of explorer 3 redrew its figure",
    ]
