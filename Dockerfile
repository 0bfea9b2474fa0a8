# The docbundle server image: `docbundle serve` over streamable HTTP (the default command) or stdio
# (`docker run -i IMAGE serve`), serving the bundles of the volume /bundles. docs/deployment.md says how to
# run it; `nox -s image` builds and smoke-tests it; tests/image/test_image_files.py keeps this file honest.
#
# Build arguments:
#   BASE_IMAGE   a Debian-like image with python3 (>= 3.11, with its venv module) and useradd; the same
#                image is the build and the runtime stage, so the virtualenv's interpreter is there.
#   EXTRAS       docbundle-server extras to install: "semantic" (the embedding model and numpy: hybrid and
#                semantic search), "otel" (trace export), "semantic,otel". None by default. Every package
#                comes from the lock, pinned with its hashes: requirements/image[-EXTRA...].txt
#                (`nox -s lock` writes one per value named here), the build backend from build.txt.
#   PIP_*        the builder's pip settings, for a build behind a mirror or a proxy (pip reads them from
#                the environment). They exist in the build stage only: the runtime stage never declares
#                them, so the published image holds neither them nor pip's cache.
# A CA bundle pip must trust (a TLS-inspecting proxy) is a BuildKit secret, never a layer:
#   docker build --secret id=pip_cert,src=/path/to/ca.pem .
ARG BASE_IMAGE=python:3.11-slim

# --- build: the locked dependencies and docbundle-server's wheel, installed into a virtualenv ---
FROM ${BASE_IMAGE} AS build
ARG EXTRAS=""
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_TRUSTED_HOST
ARG PIP_DEFAULT_TIMEOUT
ARG PIP_RETRIES
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
COPY server /src/server
COPY requirements/image*.txt requirements/build.txt /src/requirements/
# The dependencies with --require-hashes from the lock for EXTRAS (an EXTRAS without one stops the build,
# saying which file and values exist); the server's wheel built without build isolation by the locked
# hatchling of a throwaway virtualenv (so the build backend is pinned too, and stays out of the image),
# installed without dependencies. pip and setuptools (which a Python 3.11 venv starts with) leave the
# virtualenv afterwards: the server needs neither, and the image is smaller and has fewer packages to
# patch without them.
RUN --mount=type=secret,id=pip_cert,required=false \
    set -eu; \
    if [ -s /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi; \
    lock="requirements/image$(printf '%s' "${EXTRAS:+-$EXTRAS}" | tr ',' '-').txt"; \
    if [ ! -f "/src/$lock" ]; then \
        echo "EXTRAS=$EXTRAS: no lock $lock; use one of: '' semantic otel semantic,otel" \
            "(or add the set to noxfile.py's IMAGE_EXTRAS and run nox -s lock)" >&2; \
        exit 1; \
    fi; \
    python3 -m venv /tmp/build-tools; \
    /tmp/build-tools/bin/pip install --require-hashes -r /src/requirements/build.txt; \
    /tmp/build-tools/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels /src/server; \
    python3 -m venv /opt/docbundle; \
    /opt/docbundle/bin/pip install --require-hashes -r "/src/$lock"; \
    /opt/docbundle/bin/pip install --no-deps --no-index /wheels/docbundle_server-*.whl; \
    /opt/docbundle/bin/pip uninstall --yes setuptools pip; \
    /opt/docbundle/bin/docbundle --version

# --- runtime: the virtualenv and a user, nothing else ---
FROM ${BASE_IMAGE} AS runtime
# uid 10001: outside the range of a host's own users, so files it writes on a bind mount are nobody's.
# /bundles and /keys are made here, owned by it, so a named volume mounted there starts writable by it
# (for `docbundle install` and `pull`; the server itself writes nothing).
RUN useradd --system --uid 10001 --user-group --home-dir /nonexistent --no-create-home \
        --shell /usr/sbin/nologin docbundle \
    && install -d -o docbundle -g docbundle -m 0755 /bundles /keys
COPY --from=build /opt/docbundle /opt/docbundle
# No bytecode written at run time (the root filesystem is read-only; pip compiled it at install time);
# fewer glibc malloc arenas: a smaller, steadier resident size (docs/deployment.md, Capacity).
ENV PATH=/opt/docbundle/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MALLOC_ARENA_MAX=2 \
    DOCBUNDLE_BUNDLES=/bundles \
    DOCBUNDLE_KEYS=/keys/keys.toml
VOLUME ["/bundles"]
USER 10001:10001
EXPOSE 8000

# /healthz: the process answers HTTP (liveness). /readyz (libraries served, keys usable) is for a load
# balancer or a readiness probe: an empty volume is not a reason to restart the container.
# http.client: neither curl nor wget is in the image.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python3", "-c", "import http.client as h, sys; c = h.HTTPConnection('127.0.0.1', 8000, timeout=4); c.request('GET', '/healthz'); sys.exit(c.getresponse().status != 200)"]

ENTRYPOINT ["docbundle"]
CMD ["serve", "--transport", "http", "--host", "0.0.0.0", "--port", "8000"]
