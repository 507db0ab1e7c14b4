# Two entry points (see README): `make run` and `make test`. Everything they need is installed here,
# from the hash-pinned lock in requirements/ (refresh it with `make lock`, see docs/development.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TOOLS := .tools
# The extras each lock is compiled with; `make lock` is the only writer of requirements/*.txt.
DEV_EXTRAS := --extra dev --extra gemini --extra openai --extra operator --extra kubernetes
IMAGE_EXTRAS := --extra operator --extra gemini --extra openai
COMPILE = $(TOOLS)/bin/uv pip compile --generate-hashes --universal --python-version 3.11 \
	--custom-compile-command "make lock" --quiet

.PHONY: install run test lint typecheck unit bench clean lock lock-upgrade k8s-tools

# pip, setuptools and wheel come from the lock too (the project builds without isolation), so
# the same bytes install on a laptop, in CI and in the image.
$(STAMP): pyproject.toml requirements/build.txt requirements/dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements/build.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r requirements/dev.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(BIN)/python -m pip check
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

$(TOOLS)/bin/uv: requirements/tools.txt
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements/tools.txt
	touch $@

# Re-resolve the locks from pyproject.toml, keeping every pin that still satisfies it.
lock: $(TOOLS)/bin/uv
	$(COMPILE) pyproject.toml $(DEV_EXTRAS) -o requirements/dev.txt
	$(COMPILE) pyproject.toml $(IMAGE_EXTRAS) -c requirements/dev.txt -o requirements/image.txt
	$(COMPILE) requirements/build.in -o requirements/build.txt
	$(COMPILE) requirements/tools.in -o requirements/tools.txt

# The same, moving every pin to the newest version pyproject.toml allows.
lock-upgrade: $(TOOLS)/bin/uv
	$(COMPILE) --upgrade pyproject.toml $(DEV_EXTRAS) -o requirements/dev.txt
	$(COMPILE) pyproject.toml $(IMAGE_EXTRAS) -c requirements/dev.txt -o requirements/image.txt
	$(COMPILE) --upgrade requirements/build.in -o requirements/build.txt

clean:
	rm -rf $(VENV) $(TOOLS) .mypy_cache .pytest_cache .ruff_cache
