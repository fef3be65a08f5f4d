# syntax=docker/dockerfile:1
# The gateway image. Two targets:
#
#   docker build -t comfy-gateway .
#       `runtime` (the default): the gateway alone, with its embedded Redis and the emulator.
#       Real workers come from a ComfyUI mounted at run time (a checkout and the Python that
#       runs it, at the same paths as on the host), or from [[workers]] with `url`.
#   docker build -t comfy-gateway:comfyui --target comfyui --build-context comfyui=/opt/ComfyUI .
#       `comfyui`: the same, with that ComfyUI checkout layered on at /comfyui and its
#       requirements in /opt/comfyui; one worker per visible GPU unless the config says more.
#       The checkout's models, outputs and user data are left out: mount models at
#       /comfyui/models.
#
# Volumes: /data (the data dir: AOF of the embedded Redis, worker outputs, the shared input
# folder) and /etc/comfy-gateway (the farm file: COMFY_GATEWAY_CONFIG=/etc/comfy-gateway/farm.toml).
# Dependencies are pinned by constraints.txt, the file `make` installs with.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
RUN python -m venv /opt/gateway
COPY constraints.txt pyproject.toml README.md ./
COPY gateway ./gateway
COPY workers ./workers
RUN /opt/gateway/bin/pip install -c constraints.txt .

FROM ${PYTHON_IMAGE} AS base
# tini as PID 1: passes SIGTERM to the gateway alone (it drains, then stops its children)
# and reaps what the workers leave behind.
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 gateway \
    && useradd --system --uid 10001 --gid gateway --home-dir /data --shell /usr/sbin/nologin gateway \
    && mkdir -p /data /etc/comfy-gateway \
    && chown gateway:gateway /data
COPY --from=build /opt/gateway /opt/gateway
ENV PATH=/opt/gateway/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    COMFY_GATEWAY_HOST=0.0.0.0 \
    COMFY_GATEWAY_DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 8188
# /healthz answers once the workers started and the server listens: allow for ComfyUI's start.
HEALTHCHECK --interval=15s --timeout=5s --start-period=300s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('COMFY_GATEWAY_PORT', '8188'), timeout=4)"]
STOPSIGNAL SIGTERM
USER gateway
WORKDIR /data
ENTRYPOINT ["tini", "--", "comfy-gateway"]
CMD ["serve"]

FROM base AS comfyui
ARG COMFYUI_PIP_ARGS=""
USER root
COPY --from=comfyui --exclude=.git --exclude=models --exclude=output --exclude=input \
    --exclude=temp --exclude=user . /comfyui
RUN /usr/local/bin/python -m venv /opt/comfyui \
    && /opt/comfyui/bin/pip install --no-cache-dir ${COMFYUI_PIP_ARGS} -r /comfyui/requirements.txt \
    && mkdir -p /comfyui/models /comfyui/user \
    && chown gateway:gateway /comfyui/user
ENV COMFY_GATEWAY_COMFYUI=/comfyui \
    COMFY_GATEWAY_COMFYUI_PYTHON=/opt/comfyui/bin/python
USER gateway

FROM base AS runtime
