"""A learner's first hour, done in a real JupyterLab in headless Chromium, with the keyboard and the mouse.

The session's shared server (conftest.py) serves a temporary copy of the repository the way ``make lab`` serves the
repository itself, so the learner's edits and practice record never touch the real tree; ``fresh_lab`` resets that
copy to a fresh clone's state before the journey and after it (``LabServer.reset_learner_state``). The test:

1. opens the start page, runs it, and follows its link to topic 05;
2. opens ``exercises/05_kv_cache.py`` from the file browser, types a correct ``kv_cache_bytes`` into the
   editor and saves it with Ctrl+S;
3. runs notebook 05's grade cell and sees 05a pass;
4. types the classic mistake (``num_attention_heads`` where ``num_key_value_heads`` belongs), saves, re-runs
   the grade cell and sees the grader name that mistake and the factor it costs on Llama-2-70B;
5. answers the start page's practice card: another quantity of the card first (the widget names the slip and
   gives a second try without showing the answer), then the right value (accepted);
6. fixes the exercise, re-runs the start page's status cells and sees 05a go from not attempted to passed
   while every other exercise keeps its status.

Screenshots of each step go to test-artifacts/browser/journey_*.png.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from playwright.sync_api import TimeoutError as PlaywrightTimeout

from labpage import run_all

from ringlab.calc import MODELS
from ringlab.course import get_topic
from ringlab.practice.session import prepare
from ringlab.practice.units import expected_value, format_value

KERNEL_MS = 120_000  # a kernel start or one cell's run, on a busy 2-core machine
SAVE_S = 30.0
START = "notebooks/00_start_here.ipynb"
EXERCISE = "exercises/05_kv_cache.py"
STUB = 'raise NotImplementedError("05a: replace this line with your code")'

# What the learner types in place of the stub's ``raise`` line. The editor indents a new line like the line
# before it, so the lines are typed without their indentation, as a person types them.
RIGHT = [
    'kv_heads = config["num_key_value_heads"]',
    'head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]',
    'window = config.get("sliding_window") if config.get("use_sliding_window", True) else None',
    "held = tokens if window is None else min(tokens, window)",
    'return 2 * config["num_hidden_layers"] * kv_heads * head_dim * bytes_per_element * held * batch_size',
]
# Every query head counted as if it had its own K and V: the mistake GQA exists to avoid.
WRONG_LINE = 'kv_heads = config["num_attention_heads"]'

STATUS = re.compile(r"\b(\d\d[a-z])\s+(?:[a-z0-9_]+\s+)?(not attempted|wrong|passed)\b")


def tab(page, name: str):
    """The main-area tab labelled ``name``."""
    label = page.locator(".lm-TabBar-tabLabel", has_text=re.compile(f"^{re.escape(name)}$"))
    return page.locator("#jp-main-dock-panel .lm-TabBar-tab").filter(has=label)


def document(page, name: str):
    """The notebook or editor panel of the open document ``name`` (its tab names the panel's id)."""
    found = tab(page, name)
    found.wait_for(timeout=KERNEL_MS)
    return page.locator(f"#{found.get_attribute('data-id')}")


def show(page, name: str):
    """Bring document ``name`` to the front by clicking its tab; return its panel."""
    tab(page, name).click()
    panel = document(page, name)
    panel.wait_for(state="visible")
    return panel


def wait_kernel_idle(page, name: str) -> None:
    """Wait until notebook ``name`` is in front and its kernel has started and is idle. The status bar names the
    kernel state of the notebook in front ("Python 3 (ipykernel) | Idle"); the toolbar's indicator reads idle
    even before there is a kernel, and Run All then asks which kernel to start."""
    page.wait_for_function(
        """tab => tab.classList.contains('lm-mod-current')
                  && (document.querySelector('#jp-main-statusbar') || {innerText: ''}).innerText.includes('| Idle')""",
        arg=tab(page, name).element_handle(), timeout=KERNEL_MS)


def code_cell(panel, source: str):
    """The code cell whose source contains ``source``."""
    editor = panel.page.locator(".jp-InputArea-editor", has_text=source)
    cell = panel.locator(".jp-CodeCell").filter(has=editor)
    assert cell.count() == 1, f"{cell.count()} code cells contain {source!r}"
    return cell


def run_cell(cell, expected: re.Pattern) -> str:
    """Click into a code cell and press Shift+Enter, as a learner does; wait until it has a new execution count
    and its output matches ``expected``; return the output's text."""
    prompt = cell.locator(".jp-InputArea-prompt")
    before = prompt.inner_text().strip()
    cell.locator(".jp-InputArea-editor .cm-content").click()
    cell.page.keyboard.press("Shift+Enter")
    cell.page.wait_for_function(
        """([cell, before, pattern]) => {
            const prompt = cell.querySelector('.jp-InputArea-prompt').innerText.trim();
            const out = cell.querySelector('.jp-OutputArea');
            return /^\\[\\d+\\]:$/.test(prompt) && prompt !== before && out && new RegExp(pattern).test(out.innerText);
        }""", arg=[cell.element_handle(), before, expected.pattern], timeout=KERNEL_MS)
    return cell.locator(".jp-OutputArea").inner_text()


def statuses(text: str) -> dict[str, str]:
    """Exercise id -> status as a page shows them ("05a not attempted", or a table row "05a  kv_cache  passed")."""
    return {m.group(1): m.group(2) for m in STATUS.finditer(text)}


def retype_line(page, editor, starts_with: str, lines: list[str]) -> None:
    """Select the text of the editor line that starts with ``starts_with`` (after its indentation) and type
    ``lines`` over it, pressing Enter between them."""
    line = editor.locator(".cm-line").filter(has_text=re.compile(rf"^\s*{re.escape(starts_with)}"))
    assert line.count() == 1, f"{line.count()} editor lines start with {starts_with!r}"
    line.click()
    page.keyboard.press("End")
    page.keyboard.press("Shift+Home")  # CodeMirror stops at the end of the indentation
    for i, text in enumerate(lines):
        if i:
            page.keyboard.press("Enter")
        page.keyboard.type(text)


def save_editor(page, name: str, path: Path, expected: str) -> None:
    """Ctrl+S in the editor; wait until ``path`` holds ``expected`` and the tab is no longer marked modified."""
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + SAVE_S
    while time.monotonic() < deadline and path.read_text() != expected:
        time.sleep(0.2)
    assert path.read_text() == expected, f"after Ctrl+S, {path.name} holds:\n{path.read_text()}"
    page.wait_for_function("t => !t.classList.contains('jp-mod-dirty')", arg=tab(page, name).element_handle(),
                           timeout=SAVE_S * 1000)


def press_check(page, card, want: str) -> str:
    """Press the practice card's Check until its feedback contains ``want``; return the feedback.

    Pressing again is what a learner does when the verdict is about the previous text, and it is safe: the widget
    neither re-judges nor spends a try on a box whose text it has already checked. It is needed because the
    box's new value and the click can reach the widget in the wrong order: ipykernel 7 dispatches a comm
    message that finds the shell busy at once (the value update still being handled, say) instead of after it.
    """
    feedback = card.locator(".widget-html").last
    deadline = time.monotonic() + KERNEL_MS / 1000
    while True:
        card.locator("button", has_text="Check").click()
        try:
            page.wait_for_function("([el, want]) => el.innerText.includes(want)",
                                   arg=[feedback.element_handle(), want], timeout=5_000)
            return feedback.inner_text()
        except PlaywrightTimeout:
            assert time.monotonic() < deadline, f"Check never said {want!r}; the card says:\n{feedback.inner_text()}"


def test_learner_journey(browser, fresh_lab, artifacts):
    course_lab = fresh_lab
    root = course_lab.root
    exercise = root / EXERCISE
    stub = exercise.read_text()
    assert stub.count(STUB) == 1, f"{EXERCISE} no longer has the stub line {STUB!r}"
    indent = re.search(rf"^( *){re.escape(STUB)}", stub, re.M).group(1)
    right = stub.replace(STUB, f"\n{indent}".join(RIGHT))
    wrong = right.replace(RIGHT[0], WRONG_LINE)
    llama = MODELS["llama-2-70b"]
    factor = llama.num_attention_heads // llama.num_key_value_heads  # 64 query heads share 8 KV heads

    context = browser.new_context(viewport={"width": 1280, "height": 860})
    context.set_default_timeout(30_000)
    page = context.new_page()
    try:
        # 1. The start page, as `make lab` opens it: run it, then follow the link to topic 05.
        page.goto(f"{course_lab.url}/")
        start = document(page, Path(START).name)
        wait_kernel_idle(page, Path(START).name)
        run_all(page)
        # The committed outputs already carry execution counts 1..n, so the run is over only once the practice
        # card is a live widget (the committed one is text) and no cell waits any more.
        card = start.locator(".jupyter-widgets").filter(has=page.locator("button", has_text="Check")).first
        card.wait_for(timeout=KERNEL_MS)
        page.wait_for_function(
            """panel => [...panel.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]
                .every(e => /^\\[\\d+\\]:$/.test(e.innerText.trim()))""",
            arg=start.element_handle(), timeout=KERNEL_MS)
        cells = start.locator(".jp-CodeCell")
        shown = [statuses(cells.nth(i).locator(".jp-OutputArea").inner_text()) for i in range(cells.count())]
        status_cells = [i for i, found in enumerate(shown) if "05a" in found]
        assert status_cells, "no output of the start page shows exercise 05a's status"
        for i in status_cells:
            assert set(shown[i].values()) == {"not attempted"}, f"a fresh copy already has progress: {shown[i]}"
        link = start.locator(".jp-OutputArea-output a[href*='05_kv_cache.ipynb']").first
        link.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / "journey_1_start_page.png"))
        link.click()
        topic = document(page, "05_kv_cache.ipynb")
        topic.locator(".jp-MarkdownOutput h1", has_text=get_topic("05").title).wait_for(timeout=KERNEL_MS)
        wait_kernel_idle(page, "05_kv_cache.ipynb")
        page.screenshot(path=str(artifacts / "journey_2_topic_05.png"))

        # 2. The exercise file from the file browser: up to the root, into exercises/, double-click the file.
        page.locator("#filebrowser .jp-BreadCrumbs-home").click()
        item = page.locator("#filebrowser .jp-DirListing-itemText")
        item.filter(has_text=re.compile(r"^exercises$")).dblclick()
        item.filter(has_text=re.compile(rf"^{re.escape(Path(EXERCISE).name)}$")).dblclick()
        editor = document(page, Path(EXERCISE).name)
        editor.locator(".cm-line", has_text=STUB).wait_for()
        retype_line(page, editor, STUB, RIGHT)
        save_editor(page, Path(EXERCISE).name, exercise, right)
        page.screenshot(path=str(artifacts / "journey_3_exercise_typed.png"))

        # 3. Notebook 05's grade cell: passed.
        topic = show(page, "05_kv_cache.ipynb")
        grade_cell = code_cell(topic, 'grade("05a")')
        text = run_cell(grade_cell, re.compile(r"05a kv_cache_bytes: (passed|PASSED)"))
        assert "wrong" not in text.lower() and "not attempted" not in text.lower(), text
        page.screenshot(path=str(artifacts / "journey_4_grade_passed.png"))

        # 4. The classic mistake, saved and graded: the grader names it and what it costs.
        show(page, Path(EXERCISE).name)
        retype_line(page, editor, RIGHT[0], [WRONG_LINE])
        save_editor(page, Path(EXERCISE).name, exercise, wrong)
        show(page, "05_kv_cache.ipynb")
        text = run_cell(grade_cell, re.compile(r"05a kv_cache_bytes: (wrong|WRONG)"))
        assert re.search(r"num_attention_heads.*num_key_value_heads", text, re.S), text
        assert f"{factor}x too large" in text, text
        page.screenshot(path=str(artifacts / "journey_5_grade_mistake.png"))

        # 5. The start page's practice card: another of the card's quantities first, then the right value.
        show(page, Path(START).name)
        title = re.search(r"(\d\d)\. .*\(seed (\d+)\)", card.inner_text())
        assert title, f"the practice card shows no card number and seed:\n{card.inner_text()}"
        drawn = prepare(title.group(1), int(title.group(2)))
        assert len(drawn.asks) >= 2, f"card {drawn.id} asks for one number; the test types another of its answers"
        asked, other = drawn.asks[0], drawn.asks[1]
        typed = {a.key: format_value(expected_value(a, drawn.expected[a.key]), a.unit, a.show) for a in drawn.asks}
        assert typed[asked.key] != typed[other.key]
        box = card.locator(".widget-text input").first
        box.click()
        page.keyboard.type(typed[other.key])
        said = press_check(page, card, f"{asked.label}: wrong")
        assert other.label in said, f"the slip is not named: {said}"
        assert "second try" in said and typed[asked.key] not in said, f"no second try before the answer: {said}"
        card.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / "journey_6_practice_slip.png"))
        box.click()
        page.keyboard.press("Control+a")
        page.keyboard.type(typed[asked.key])
        press_check(page, card, f"{asked.label}: right")
        page.screenshot(path=str(artifacts / "journey_7_practice_right.png"))

        # 6. Fix the exercise, re-run the start page's status cells: 05a passed, everything else as it was.
        show(page, Path(EXERCISE).name)
        retype_line(page, editor, WRONG_LINE, [RIGHT[0]])
        save_editor(page, Path(EXERCISE).name, exercise, right)
        show(page, Path(START).name)
        for i in status_cells:
            after = statuses(run_cell(cells.nth(i), re.compile(r"05a\s+(?:[a-z0-9_]+\s+)?passed")))
            assert after == {**shown[i], "05a": "passed"}, f"status changes other than 05a's: {after}"
        cells.nth(status_cells[-1]).get_by_text("05a").first.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / "journey_8_progress.png"))
    except BaseException:
        page.screenshot(path=str(artifacts / "journey_failed.png"))  # where it stopped, as the learner would see it
        raise
    finally:
        context.close()
        course_lab.shutdown_kernels()
