# The commit owner as a container image, built from the same pyproject.toml as `make install`.
# docker build -t delta-commit-owner .   (docker-compose.yml builds it for you)

FROM python:3.11.11-slim-bookworm AS build
WORKDIR /src
# Only what the wheel is made of (see [tool.hatch.build.targets.wheel] in pyproject.toml).
COPY pyproject.toml README.md ./
COPY coordinator ./coordinator
COPY client ./client
COPY backfill ./backfill
COPY schema ./schema
RUN pip install --no-cache-dir --upgrade pip \
 && pip wheel --no-cache-dir --wheel-dir /wheels '.[maintain]'

FROM python:3.11.11-slim-bookworm
RUN useradd --system --uid 10001 --home-dir /srv/owner --create-home owner
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER owner
WORKDIR /srv/owner
# Settings are COMMIT_OWNER_* variables (docs/configuration.md); these suit a container.
ENV COMMIT_OWNER_HOST=0.0.0.0 \
    COMMIT_OWNER_PORT=8080 \
    COMMIT_OWNER_LOG_FORMAT=json \
    PYTHONUNBUFFERED=1
EXPOSE 8080
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=5 \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/readyz', timeout=2)"
# SIGTERM stops the service gracefully (exit 0); see `commit-owner serve --help`.
STOPSIGNAL SIGTERM
ENTRYPOINT ["commit-owner"]
CMD ["serve"]
