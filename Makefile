# Two entry points (see README): `make run` and `make test`. Everything they need is installed here.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test lint typecheck unit bench clean k8s-tools

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Starts Engram on its embedded default: local storage under ~/.local/share/engram, offline embedder.
run: $(STAMP)
	$(BIN)/engram serve

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q

# The Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager) and helm/kubectl
# for tests/k8s: built once into ~/.cache/engram/k8s/<pin-hash>/ (ENGRAM_K8S_CACHE), rebuilt only
# when tools/k8s/go/go.mod changes. Cold: see docs/operations.md; warm: instant.
k8s-tools:
	$(PYTHON) tools/k8s/build.py --if-possible

test: lint typecheck k8s-tools unit

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
