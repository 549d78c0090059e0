# The two commands: `make demo` (the main job) and `make test` (everything); `make lab` opens JupyterLab.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# A CPU build of torch 2.13.0 lies on the dev machines' disk; override for CUDA, e.g. TORCH_SPEC=torch.
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.ringlab-installed

.PHONY: install demo test lab exercises bench clean

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[torch,lab,test,triton]"
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(PY) -m ringlab verify

test: install
	$(PY) -m pytest tests notebooks --nbval --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg

# JupyterLab refuses to start as root without --allow-root (containers, CI boxes).
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)

lab: install
	$(VENV)/bin/jupyter lab notebooks/ $(LAB_ARGS)

bench: install
	$(PY) benchmarks/bench_ring_sim.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
