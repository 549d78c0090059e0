"""Notebooks in a real JupyterLab, in headless Chromium: they run clean and their explorers respond.

Every notebook whose committed outputs hold a widget is run with Run All; each control of each
explorer is moved and the figure or text must change. Test doubles with a broken callback prove
that the check fails when an explorer does not respond. Screenshots go to test-artifacts/browser/.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from labpage import check_explorers, committed_widget_notebooks, open_notebook, run_all, save_and_read, \
    assert_clean_run
from labserver import ROOT

WIDGET_NOTEBOOKS = committed_widget_notebooks(ROOT / "notebooks")


def test_some_notebook_has_an_explorer():
    assert WIDGET_NOTEBOOKS, "no committed notebook output holds a widget view"


@pytest.mark.parametrize("path", WIDGET_NOTEBOOKS, ids=lambda p: p.stem)
def test_explorers_respond_in_the_browser(path, page, lab, artifacts):
    moved = check_explorers(page, lab.url, lab.root, path.name, screenshot=artifacts / f"{path.stem}.png")
    assert moved


def test_start_page_links_every_topic(page, lab, artifacts):
    """00_start_here runs clean, links every topic notebook, and a link opens its notebook in Lab."""
    name = "00_start_here.ipynb"
    open_notebook(page, lab.url, name)
    run_all(page)
    assert_clean_run(save_and_read(page, lab.root / name), name)
    topics = sorted(p.name for p in lab.root.glob("[0-9][0-9]_*.ipynb") if not p.name.startswith("00_"))
    # Lab rewrites a relative link in an output to /files/<name>?_xsrf=... and opens it in Lab on click.
    links = page.locator(".jp-OutputArea-output a")
    hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
    assert sorted(re.search(r"/files/([^?]+)", h).group(1) for h in hrefs) == topics
    assert "not attempted" in page.locator(".jp-OutputArea-output").first.inner_text()
    page.screenshot(path=str(artifacts / "00_start_here.png"))
    links.first.click()
    page.wait_for_url(re.compile(f"/tree/{re.escape(topics[0])}$"))
    title = lab.root.joinpath(topics[0]).read_text()
    heading = page.locator(".jp-MarkdownOutput h1").first
    assert heading.inner_text().strip().rstrip("¶") in title


# A minimal explorer built like ringlab's: a slider whose callback redraws a figure into an Image.
_DOUBLE = '''import ipywidgets as w
from ringlab.viz._mpl import png_bytes, pyplot

plt = pyplot()


def figure(n):
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.bar(range(n), range(1, n + 1))
    ax.set_title(f"n = {n}")
    return fig


slider = w.IntSlider(value=3, min=1, max=9, description="n")
image = w.Image(value=png_bytes(figure(3)), format="png")


def render(change):
{body}


slider.observe(render, names="value")
w.VBox([slider, image])'''

CALLBACKS = {
    "working": "    image.value = png_bytes(figure(change.new))",
    "raises": "    raise RuntimeError('deliberately broken callback')",
    "never_updates": "    png_bytes(figure(change.new))  # draws, but never puts the figure in the Image",
}


def _write_double(lab, kind: str) -> str:
    name = f"double_{kind}.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells.append(nbformat.v4.new_code_cell(_DOUBLE.replace("{body}", CALLBACKS[kind])))
    nbformat.write(nb, lab.root / name)
    return name


def test_the_check_passes_on_a_working_double(page, lab):
    assert check_explorers(page, lab.url, lab.root, _write_double(lab, "working")) == ["explorer 0: slider n"]


@pytest.mark.parametrize("kind", ["raises", "never_updates"])
def test_the_check_fails_on_a_broken_callback(kind, page, lab):
    with pytest.raises(AssertionError, match=re.escape("moving slider n did not change the figure or text")):
        check_explorers(page, lab.url, lab.root, _write_double(lab, kind))
