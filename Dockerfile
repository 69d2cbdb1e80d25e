# syntax=docker/dockerfile:1
# Operator/CLI image of gpustack-k3. The chart runs it as
#   command: ["gpustack-k3"]  args: ["operator", "run", "--metrics-port", "8080", ...]
# with runAsUser/runAsGroup 65532, a read-only root filesystem and an emptyDir on /tmp
# (charts/gpustack-k3/templates/deployment.yaml); tests/e2e_static checks that they agree.
#
#   docker build -t gpustack-k3:dev .
#   docker build --network host --build-arg BASE_IMAGE=gpustack-k3/base:bookworm-py3 -t gpustack-k3:dev .
#
# BASE_IMAGE must carry Python 3.11+. A Debian base without venv/ensurepip (a debootstrap minbase
# image) gets python3-venv from apt in the build stage; python:3.11-slim already has it.
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off PYTHONDONTWRITEBYTECODE=1
RUN if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then \
        apt-get update \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && python3 -m venv /opt/gpustack-k3
WORKDIR /src
# Only what the wheel is built from (.dockerignore keeps the context to these paths): the catalog data
# and the templates are package data inside gpustack_k3/. The `validate` extra (kubernetes-validate) makes the
# operator schema-check what it applies; the build renders every preset's Kubernetes objects with it.
# build-ca.pem: optional extra CA bundle for pip behind a TLS-intercepting proxy (staged by
# e2e/images/build.sh from GPUSTACK_K3_BUILD_CA; the wildcard lets the COPY match nothing). It stays in
# this build stage: the final image does not carry it.
COPY pyproject.toml build-ca.pe[m] ./
COPY gpustack_k3/ ./gpustack_k3/
RUN if [ -f build-ca.pem ]; then export PIP_CERT=/src/build-ca.pem; fi \
    && /opt/gpustack-k3/bin/python -m pip install --no-compile ".[validate]" \
    && /opt/gpustack-k3/bin/python -m compileall -q /opt/gpustack-k3/lib \
    && /opt/gpustack-k3/bin/gpustack-k3 --version \
    && for p in $(/opt/gpustack-k3/bin/gpustack-k3 presets -o json \
                  | /opt/gpustack-k3/bin/python -c 'import json,sys; print(" ".join(p["name"] for p in json.load(sys.stdin)))'); do \
           /opt/gpustack-k3/bin/gpustack-k3 render --preset "$p" --target kubernetes >/dev/null 2>&1 \
           || { echo "the image cannot render preset $p for Kubernetes" >&2; exit 1; }; \
       done

FROM ${BASE_IMAGE}
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="gpustack-k3" \
      org.opencontainers.image.description="Validate, plan, render and launch Kimi-K3 on 8xB300 (vLLM/SGLang); K3Deployment operator" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.url="https://github.com/gpustack/gpustack" \
      ai.gpustack.k3.chart="charts/gpustack-k3" \
      ai.gpustack.k3.run-as="65532:65532"
COPY --from=build /opt/gpustack-k3 /opt/gpustack-k3
# The read-only root filesystem of the chart: no bytecode writes (compiled at build time), HOME and
# caches on the /tmp emptyDir.
ENV PATH=/opt/gpustack-k3/bin:${PATH} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    XDG_CACHE_HOME=/tmp/.cache
# Numeric non-root user = the chart's runAsUser/runAsGroup (runAsNonRoot needs a numeric USER).
USER 65532:65532
WORKDIR /tmp
# metrics, /healthz, /readyz (chart value operator.metricsPort)
EXPOSE 8080
ENTRYPOINT ["gpustack-k3"]
CMD ["operator", "run"]
