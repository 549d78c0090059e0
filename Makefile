# Learners: `make demo` (set up, then check ring all-reduce on real gradients) and `make lab` (the course in
# JupyterLab). Contributors: `make test` (every test and notebook).
PYTHON ?= python3
# Exact versions `make test` last passed with; `make test CONSTRAINTS=` tries the newest releases instead,
# in their own .venv-latest so the pinned .venv stays as it is (README: "Versions").
CONSTRAINTS ?= constraints.txt
VENV ?= $(if $(CONSTRAINTS),.venv,.venv-latest)
PY := $(VENV)/bin/python
PIP_INSTALL := $(PY) -m pip install --quiet $(if $(CONSTRAINTS),--constraint $(CONSTRAINTS))
# torch goes in first, at the version the constraints name: the dev machines' disk holds a CPU build of it,
# elsewhere pip takes PyPI's (CUDA on Linux). Another release: e.g. `make test CONSTRAINTS= TORCH_SPEC=torch==2.14.1`.
TORCH_SPEC ?= torch
# Triton publishes wheels for Linux on x86_64 and aarch64 only, and only topic 12 needs it: elsewhere (macOS,
# other CPUs) the install leaves it out. `make EXTRAS=torch,lab,shards,test` leaves it out anywhere.
TRITON_WHEELS := $(shell $(PYTHON) -c "import platform, sys; print(sys.platform.startswith('linux') and platform.machine().lower() in ('x86_64', 'amd64', 'aarch64', 'arm64'))" 2>/dev/null)
comma := ,
EXTRAS ?= torch,lab,shards,test$(if $(filter True,$(TRITON_WHEELS)),$(comma)triton)
STAMP := $(VENV)/.ringlab-installed

.PHONY: install demo test test-fast lab bench constraints clean

$(STAMP): pyproject.toml Makefile $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PIP_INSTALL) "$(TORCH_SPEC)"
	$(PIP_INSTALL) -e ".[$(EXTRAS)]"
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(PY) -m ringlab verify

# Tests run in TEST_WORKERS processes (pytest-xdist: `auto` is one per core, at most 4), a whole file to one process,
# so a notebook's cells run in order in one kernel; `make test TEST_WORKERS=0` runs them in this process.
# Includes tests/test_notebooks_portable.py: nbval again under other kernels and one thread.
TEST_WORKERS ?= auto
XDIST := -n $(TEST_WORKERS) $(if $(filter auto,$(TEST_WORKERS)),--maxprocesses 4) --dist loadfile

test: install
	$(PY) -m pytest $(XDIST) tests notebooks --nbval --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg

# A developer's loop: the tests not marked slow or browser (pyproject.toml's markers), no notebooks.
test-fast: install
	$(PY) -m pytest $(XDIST) tests -m "not slow and not browser"

# JupyterLab on the repository root with notebooks/00_start_here.ipynb open; the command line lives in
# ringlab/course/lab.py (which adds --allow-root when run as root), shared with the browser tests.
# LAB_ARGS go to jupyter-lab as they are, e.g. `make lab LAB_ARGS="--no-browser --port=8890"`.
LAB_ARGS ?=

lab: install
	$(PY) -m ringlab.course.lab $(LAB_ARGS)

bench: install
	$(PY) benchmarks/bench_ring_sim.py

# After a green `make test` (or `make test CONSTRAINTS=`), pin what it ran with.
constraints: install
	{ echo "# Exact versions the test suite last passed with; \`make\` installs with pip --constraint this file."; \
	  echo "# Written by \`make constraints\` from pip freeze of the virtual environment (torch without its"; \
	  echo "# local build label, so a CPU or a CUDA build of the same release both match)."; \
	  $(PY) -m pip freeze --exclude-editable | sed -E 's/^(torch==[^+]+)\+.*/\1/'; } > constraints.txt
	touch $(STAMP)

clean:
	rm -rf .venv .venv-latest .pytest_cache .hypothesis
