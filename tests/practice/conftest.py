"""Every practice test keeps its record in a temporary XDG state dir, never in the user's."""

import pytest


@pytest.fixture(autouse=True)
def state_home(tmp_path, monkeypatch):
    home = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(home))
    return home
