# voxgate, CPU image: the gateway with its ASR (Whisper tiny.en, bundled), Piper TTS (a voice
# bundled) and Pocket TTS.
#
#   docker build -t voxgate .
#   docker run -p 8000:8000 -v voxgate-data:/data \
#       -v /etc/voxgate/key:/run/secrets/voxgate_key:ro -e VOXGATE_API_KEY_FILE=/run/secrets/voxgate_key voxgate
#
# The CUDA build is Dockerfile.cuda. Both install with scripts/install-wheel.sh, the same
# script the tests run (tests/e2e/test_wheel_container.py). See docs/deployment.md.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# A CPU build of torch: PyPI's Linux wheels are CUDA builds of several GB.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG TORCH_SPEC=torch==2.13.0
ARG VOXGATE_EXTRAS=asr,tts,piper
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY pyproject.toml README.md /src/
COPY gateway /src/gateway
COPY engines /src/engines
COPY auth /src/auth
COPY scripts/install-wheel.sh /src/scripts/install-wheel.sh
RUN TORCH_INDEX_URL="$TORCH_INDEX_URL" TORCH_SPEC="$TORCH_SPEC" VOXGATE_EXTRAS="$VOXGATE_EXTRAS" \
    /src/scripts/install-wheel.sh /src /opt/voxgate

FROM ${PYTHON_IMAGE}
RUN useradd --system --uid 10001 --user-group --home-dir /data --no-create-home voxgate \
    && mkdir -p /data && chown voxgate:voxgate /data
COPY --from=build /opt/voxgate /opt/voxgate
# Server mode with a credential is the container default: the bind is not loopback.
ENV PATH=/opt/voxgate/bin:$PATH PYTHONUNBUFFERED=1 \
    VOXGATE_HOST=0.0.0.0 VOXGATE_PORT=8000 VOXGATE_SERVER_MODE=1 VOXGATE_DATA_DIR=/data
USER voxgate
VOLUME /data
EXPOSE 8000
# SIGTERM drains: no new sessions, open utterances finish (up to VOXGATE_DRAIN_S), then 1001.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health/live', timeout=2)"]
ENTRYPOINT ["voxgate"]
CMD ["serve"]
