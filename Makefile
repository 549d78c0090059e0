# The two commands: `make demo` (the main job) and `make test` (everything); `make lab` opens JupyterLab.
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
STAMP := $(VENV)/.ringlab-installed

.PHONY: install demo test lab exercises bench constraints clean

$(STAMP): pyproject.toml Makefile $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PIP_INSTALL) "$(TORCH_SPEC)"
	$(PIP_INSTALL) -e ".[torch,lab,test,triton]"
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(PY) -m ringlab verify

# Includes tests/test_notebooks_portable.py: nbval again under other kernels and one thread.
test: install
	$(PY) -m pytest tests notebooks --nbval --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg

# JupyterLab refuses to start as root without --allow-root (containers, CI boxes).
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)

lab: install
	$(VENV)/bin/jupyter lab notebooks/ $(LAB_ARGS)

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
