"""Drive one notebook in JupyterLab the way a learner does, and check what the browser shows.

``check_explorers`` opens a notebook, runs all cells from the Run menu, checks that no cell
produced an error and that every widget output rendered (AssertionError otherwise), then moves
each control of each explorer (keyboard on a slider handle, a new choice in a dropdown, a click
on a toggle) and reports every control that left the explorer's figure bytes and text unchanged.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
RUN_TIMEOUT_MS = 150_000  # one notebook's Run All; each runs in well under a minute under nbval
CHANGE_TIMEOUT_S = 10.0  # a callback redraws one matplotlib figure
SETTLE_S = 0.4  # poll interval; the explorer must hold still this long to count as redrawn


def committed_widget_notebooks(folder: Path) -> list[Path]:
    """Notebooks whose committed outputs contain a widget view."""
    return [p for p in sorted(folder.glob("*.ipynb"))
            if any(WIDGET_MIME in out.get("data", {}) for cell in json.loads(p.read_text())["cells"]
                   for out in cell.get("outputs", []))]


def open_notebook(page, url: str, name: str) -> None:
    """Open ``name`` in the single-document view of a fresh workspace and wait for an idle kernel."""
    page.goto(f"{url}/doc/workspaces/{re.sub(r'[^A-Za-z0-9]', '', name)}/tree/{name}?reset")
    page.wait_for_function("() => (document.querySelector('#jp-main-statusbar') || {innerText: ''})"
                           ".innerText.includes('| Idle')", timeout=90_000)


def run_all(page) -> None:
    """Run > Run All Cells, then wait until every code cell shows an execution count and the kernel is idle."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Run All Cells$")).click()
    page.wait_for_function("""() => {
        const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]
            .map(e => e.innerText.trim());
        const idle = document.querySelector('.jp-Notebook-ExecutionIndicator[data-status="idle"]');
        return idle && prompts.length > 0 && prompts.every(t => /^\\[\\d+\\]:$/.test(t));
    }""", timeout=RUN_TIMEOUT_MS)


def save_and_read(page, path: Path) -> dict:
    """Save with Ctrl+S and return the notebook as written by the browser (outputs included)."""
    before = path.stat().st_mtime_ns
    page.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})  # command mode on the notebook
    page.keyboard.press("Escape")
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if path.stat().st_mtime_ns != before:
            try:
                return json.loads(path.read_text())
            except json.JSONDecodeError:
                pass  # caught mid-write
        time.sleep(0.2)
    raise AssertionError(f"{path.name}: Ctrl+S did not save the notebook within 30 s")


def assert_clean_run(nb: dict, name: str) -> None:
    """Every code cell ran, in order, and none has an error output."""
    cells = [c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]
    counts = [c["execution_count"] for c in cells]
    assert counts == list(range(1, len(cells) + 1)), f"{name}: execution counts after Run All: {counts}"
    for cell in cells:
        errors = [o for o in cell["outputs"] if o["output_type"] == "error"]
        assert not errors, (f"{name}: cell raised {errors[0]['ename']}: {errors[0]['evalue']}\n"
                            + "".join(cell["source"]))


def explorers(page):
    """Locators of the top-level widget views in the notebook's outputs."""
    return page.locator(".jp-OutputArea-output > .jupyter-widgets")


# Figure bytes (blob or data URLs of <img>) and visible text, leaving out the controls' own readouts
# so that a moved slider whose callback is broken does not count as a change.
_SIGNATURE_JS = """async (root) => {
    const images = [];
    for (const img of root.querySelectorAll('img')) {
        if (!img.src) { images.push(''); continue; }
        const buf = await (await fetch(img.src)).arrayBuffer();
        let bin = ''; for (const b of new Uint8Array(buf)) bin += String.fromCharCode(b);
        images.push(btoa(bin));
    }
    const clone = root.cloneNode(true);
    clone.querySelectorAll('.widget-readout, select, button, input').forEach(e => e.remove());
    return {images, text: clone.textContent};
}"""


def signature(explorer) -> tuple:
    """(sha256 of each image's bytes, text) of an explorer as the browser shows it now."""
    sig = explorer.evaluate(_SIGNATURE_JS)
    return tuple(hashlib.sha256(base64.b64decode(b)).hexdigest()[:16] for b in sig["images"]), sig["text"]


def controls(explorer) -> list[tuple[str, object]]:
    """(description, locator) of each slider, dropdown, toggle-buttons group and checkbox in an explorer; for an
    explorer whose only controls are push buttons (the practice card: Check, Hint, Show answer, New numbers),
    each button. Buttons beside other controls often just re-run what the others show, so they are left out."""
    found = []
    kinds = {".widget-slider": "slider", ".widget-dropdown": "dropdown", ".widget-toggle-buttons": "toggle",
             ".widget-checkbox": "checkbox", ".widget-radio": "radio"}
    for selector, kind in kinds.items():
        for i in range(explorer.locator(selector).count()):
            ctl = explorer.locator(selector).nth(i)
            label = ctl.locator(".widget-label").first
            text = label.inner_text().strip() if label.count() else ""
            found.append((f"{kind} {text or i}", ctl))
    if not found:
        buttons = explorer.locator("button.widget-button")
        found = [(f"button {buttons.nth(i).inner_text().strip() or i}", buttons.nth(i)) for i in range(buttons.count())]
    return found


def move(control) -> None:
    """Change a control's value the way a user does; AssertionError if it cannot be changed."""
    cls = control.get_attribute("class") or ""
    if "widget-button" in cls:
        control.click()
    elif "widget-slider" in cls:
        handle = control.locator(".noUi-handle").first
        before = handle.get_attribute("aria-valuenow")
        at_max = float(before) >= float(handle.get_attribute("aria-valuemax"))
        handle.focus()
        handle.press("ArrowLeft" if at_max else "ArrowRight")
        assert handle.get_attribute("aria-valuenow") != before, "the slider handle did not move"
    elif "widget-dropdown" in cls:
        select = control.locator("select")
        options = select.locator("option")
        assert options.count() > 1, "the dropdown has a single choice"
        current = select.evaluate("s => s.selectedIndex")
        select.select_option(index=(current + 1) % options.count())
    elif "widget-toggle-buttons" in cls or "widget-radio" in cls:
        choices = control.locator("button, input[type=radio]")
        assert choices.count() > 1, "the toggle group has a single choice"
        idle = [i for i in range(choices.count())
                if not choices.nth(i).evaluate("e => e.classList.contains('mod-active') || e.checked === true")]
        choices.nth(idle[0]).click()
    else:
        control.locator("input").first.click()


def kernel_idle(page) -> bool:
    return page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").count() > 0


def settled_change(page, explorer, before: tuple, timeout: float = CHANGE_TIMEOUT_S) -> tuple | None:
    """Wait until the explorer differs from ``before``, the kernel is idle again and the explorer holds
    still (a callback may set the caption long before the figure); return the settled signature, or
    None if nothing changed in time. Kernel status messages precede a callback's updates on the same
    channel, so once a change is seen, "idle" means that callback has finished."""
    deadline = time.monotonic() + timeout
    previous = before
    while time.monotonic() < deadline:
        time.sleep(SETTLE_S)
        current = signature(explorer)
        if current == previous and current != before and kernel_idle(page):
            return current
        previous = current
    return None


# Records when the explorer's DOM last changed (a new figure URL, caption text, a readout), so the time a
# control change takes to settle is measured to the millisecond rather than to the polling interval.
_WATCH_JS = """(root) => {
    if (!root.__ringlabObserver) {
        root.__ringlabObserver = new MutationObserver(() => { root.__ringlabLast = performance.now(); });
        root.__ringlabObserver.observe(root, {subtree: true, childList: true, attributes: true, characterData: true});
    }
    root.__ringlabLast = null;
    return performance.now();
}"""


def changed_what(page, explorer, before: tuple) -> str | None:
    """"figure" if any image's bytes changed, "text" if only text changed; None if neither did."""
    after = settled_change(page, explorer, before)
    if after is None:
        return None
    return "figure" if after[0] != before[0] else "text"


@dataclass
class Report:
    """What moving the controls did: ``moved`` lists the controls that changed their explorer, ``failures``
    says in words what went wrong (a control that left figure and text alone, an explorer without controls)."""

    moved: list[str] = field(default_factory=list)
    settle_s: dict[str, float] = field(default_factory=dict)  # control -> seconds from the move to the last change
    failures: list[str] = field(default_factory=list)


def run_clean(page, url: str, root: Path, name: str) -> dict:
    """Open ``name``, Run All, save; AssertionError unless every cell ran in order without an error."""
    open_notebook(page, url, name)
    run_all(page)
    nb = save_and_read(page, root / name)
    assert_clean_run(nb, name)
    return nb


def check_explorers(page, url: str, root: Path, name: str, screenshot: Path | None = None) -> Report:
    """Run ``name`` in the browser, then move every enabled control of every explorer, one at a time.

    Raises AssertionError when a cell errors or a widget does not render. ``failures`` lists each
    control that changed neither its explorer's figure bytes nor its text within CHANGE_TIMEOUT_S
    ("<notebook>: moving <kind> <description> did not change ..."), and each explorer with a
    figure that no control redrew.
    """
    nb = run_clean(page, url, root, name)
    expected = sum(WIDGET_MIME in o.get("data", {}) for c in nb["cells"] for o in c.get("outputs", []))
    assert "Error displaying widget" not in page.locator(".jp-Notebook").inner_text(), f"{name}: a widget failed"
    assert explorers(page).count() == expected > 0, (
        f"{name}: {expected} widget outputs after Run All, {explorers(page).count()} rendered in the page")
    report = Report()
    for i in range(expected):
        explorer = explorers(page).nth(i)
        explorer.scroll_into_view_if_needed()
        found, redrawn = controls(explorer), False
        if not found:
            report.failures.append(f"{name}: explorer {i} has no slider, dropdown, toggle or checkbox")
        for label, ctl in found:
            if ctl.evaluate("e => e.disabled === true || !!e.querySelector('[disabled]')"):
                continue  # greyed out in this state (e.g. a parameter of another schedule); a user cannot move it
            before = signature(explorer)
            start_ms = explorer.evaluate(_WATCH_JS)
            move(ctl)
            what = changed_what(page, explorer, before)
            if what:
                report.moved.append(f"explorer {i}: {label} ({what})")
                report.settle_s[f"explorer {i}: {label}"] = (explorer.evaluate("r => r.__ringlabLast") - start_ms) / 1e3
                redrawn |= what == "figure"
            else:
                report.failures.append(f"{name}: moving {label} did not change the figure or text of explorer {i} "
                                       f"within {CHANGE_TIMEOUT_S:.0f} s (broken callback?)")
        # Some controls only change a caption (a link speed, say), but a figure no control redraws is stale.
        if signature(explorer)[0] and not redrawn:
            report.failures.append(f"{name}: no control of explorer {i} redrew its figure")
    if screenshot is not None:
        explorers(page).first.scroll_into_view_if_needed()
        page.screenshot(path=str(screenshot))
    assert_clean_run(save_and_read(page, root / name), name)  # the interaction added no error either
    return report
