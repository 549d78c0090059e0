"""The README's layout table names every package of ringlab (and no package that is gone)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _layout_rows() -> set[str]:
    text = (ROOT / "README.md").read_text()
    table = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \|", table, flags=re.MULTILINE))


def test_every_top_level_package_has_a_row():
    packages = {f"ringlab/{p.parent.name}/" for p in (ROOT / "ringlab").glob("*/__init__.py")}
    rows = _layout_rows()
    assert packages <= rows, f"missing from README's layout table: {sorted(packages - rows)}"


def test_every_row_names_something_that_exists():
    missing = [row for row in _layout_rows() if not (ROOT / row).exists()]
    assert not missing, f"README's layout table names paths that do not exist: {missing}"
