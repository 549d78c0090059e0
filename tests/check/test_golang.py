"""ringlab.check.golang: the environment Go runs in for a grader, and the package clause of a learner's file."""

import tempfile

from ringlab.check.golang import go_env, set_package


def test_go_runs_offline_with_a_cache_it_can_write(monkeypatch):
    monkeypatch.setenv("GOCACHE", "/proc/not-writable/cache")  # a cache Go could not use
    monkeypatch.setenv("GOPATH", "/proc/not-writable/path")
    monkeypatch.setenv("GOFLAGS", "-mod=vendor")  # the learner's own flags do not apply to the grader's build
    env = go_env()
    assert env["GOPROXY"] == "off" and env["GOFLAGS"] == "" and env["GOWORK"] == "off"
    assert env["GOCACHE"].startswith(tempfile.gettempdir()) and env["GOPATH"].startswith(tempfile.gettempdir())


def test_a_writable_cache_is_kept(monkeypatch, tmp_path):
    monkeypatch.setenv("GOCACHE", str(tmp_path / "cache"))
    assert go_env()["GOCACHE"] == str(tmp_path / "cache")


def test_set_package_renames_only_the_package_clause():
    source = "// Package solution does it: package solution.\npackage solution\n\nimport \"fmt\"\n"
    assert set_package(source, "exercise") == ("// Package solution does it: package solution.\npackage exercise\n\n"
                                               "import \"fmt\"\n")
