# The SSD reproduction suite in one image: the post's stack on NVIDIA's CUDA 13.3 devel image (Ubuntu 24.04,
# Python 3.12). The default command is `nox --no-venv -s validate`, writing its results under a mounted
# /results. README.md, "Container", says how to build and run it; `nox -s container` builds it, runs it and
# checks what it wrote. Every Python package version comes from requirements.lock (resolved from
# constraints.txt) and constraints.txt; none is written here.
#
# Needs BuildKit (Docker >= 23 uses it by default; DOCKER_BUILDKIT=1 on 20.10) for the optional CA secret.

# The base, pinned by tag AND digest: NVIDIA re-pushes its tags, the digest names one image forever.
# The digest is the tag's multi-arch index (linux/amd64 manifest: sha256:03c372fd9c65fe77...). To move
# the base, pass both with --build-arg. Any Debian or Ubuntu image with Python >= 3.11 in its archive
# builds (CI uses a Debian stand-in: it has no CUDA toolkit, which nothing here needs at build time).
ARG CUDA_BASE_IMAGE=nvidia/cuda:13.3.1-devel-ubuntu24.04
ARG CUDA_BASE_DIGEST=sha256:4ff859525f99de5782aa73607ce24219b07dddd48d12b97c1c301d7e1cfb0a87
FROM ${CUDA_BASE_IMAGE}@${CUDA_BASE_DIGEST}

# An ARG before FROM is not visible after it unless declared again (its value carries over).
ARG CUDA_BASE_IMAGE
ARG CUDA_BASE_DIGEST

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

LABEL org.opencontainers.image.title="ssd-repro" \
      org.opencontainers.image.description="Mamba-2 SSD forward pass in cuTile, Triton (mamba_ssm) and TileGym: reproduction and float64 validation suite" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${CUDA_BASE_IMAGE}" \
      org.opencontainers.image.base.digest="${CUDA_BASE_DIGEST}"

# Distribution packages, from the base's archive (not version-pinned: they follow its security updates;
# the numerics are decided by the Python stack below, which is pinned):
#   python3, python3-venv  the distribution's Python (3.12 on Ubuntu 24.04, the post's); a venv because the
#                          system Python is externally managed (PEP 668)
#   python3-dev, gcc       Triton compiles its small C launcher against Python.h at run time
#   ca-certificates        HTTPS to the package index during the build
# useradd: the default user, numeric and unprivileged (-l: no huge lastlog file for a high uid). Any
# other uid works too (`docker run --user "$(id -u):$(id -g)"`): nothing at run time needs a passwd entry.
# hadolint ignore=DL3008
RUN set -eux; \
    apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates gcc python3 python3-dev python3-venv; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/*; \
    groupadd --gid 10001 ssd; \
    useradd -l --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin ssd; \
    mkdir -m 1777 /results

# The pinned stack, into /opt/venv. Only the two pin files are copied first, so editing the project does
# not reinstall it. Choices worth knowing:
# - requirements.lock is every resolved package, transitive ones included (torch's CUDA 13.0 wheels,
#   cuda-bindings, nvjitlink, cudnn, ...), made by `nox -s lock` from constraints.txt for Linux x86_64 and
#   Python 3.11-3.13; `nox -s container` checks that the image's `pip freeze` equals it.
# - Index: PyPI by default. SSD_PIP_INDEX_URL points pip at a mirror instead. A proxy that intercepts
#   HTTPS needs its CA: pass the host's bundle as the BuildKit secret `ca_bundle`
#   (`--secret id=ca_bundle,src=/etc/ssl/certs/ca-certificates.crt`); it is used by pip here and not kept.
# - The cuTile compiler chain (tileiras, nvcc/ptxas, nvvm, crt) is the pinned 13.4; /opt/cutile-toolchain
#   names the wheels' CUDA tree (site-packages/nvidia/cu13); CUDA_HOME and PATH point there (ENV below).
# - /tmp is a tmpfs during the install: pip keeps every downloaded wheel (~3 GB) in it until it exits, so
#   the build's disk peak is the installed 5.2 GB instead of ~8.5 GB (it needs ~3 GB of memory instead).
# - mamba-ssm: from source without its CUDA extension (its Triton SSD path needs none), against the torch
#   installed just before (--no-build-isolation).
# - tilegym --no-deps: `tilegym.ops.cutile.mamba2` needs only torch, triton and cuda-tile; what it declares
#   besides serves its model patches, benchmarks and TileCpp backend.
# - The checks at the end fail the build if the 13.4 chain is not what cuda.tile will pick (it uses the
#   pip tileiras only when tileiras, nvcc and nvvm share one minor version) or torch is not a CUDA build.
# - /opt/ssd-repro-pip-freeze.txt records every installed version.
ARG SSD_PIP_INDEX_URL=""
COPY constraints.txt requirements.lock /opt/ssd-repro/
ENV PATH="/opt/venv/bin:${PATH}" \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN --mount=type=secret,id=ca_bundle,required=false --mount=type=tmpfs,target=/tmp set -eux; \
    if [ -s /run/secrets/ca_bundle ]; then export PIP_CERT=/run/secrets/ca_bundle; fi; \
    if [ -n "${SSD_PIP_INDEX_URL}" ]; then export PIP_INDEX_URL="${SSD_PIP_INDEX_URL}"; fi; \
    python3 -m venv /opt/venv; \
    pip install -r /opt/ssd-repro/requirements.lock; \
    MAMBA_SKIP_CUDA_BUILD=TRUE MAMBA_FORCE_BUILD=TRUE \
        pip install -c /opt/ssd-repro/constraints.txt --no-deps --no-build-isolation mamba-ssm; \
    pip install -c /opt/ssd-repro/constraints.txt --no-deps tilegym; \
    ln -s "$(python -c 'import nvidia.cu13; print(nvidia.cu13.__path__[0])')" /opt/cutile-toolchain; \
    /opt/cutile-toolchain/bin/tileiras --version; \
    /opt/cutile-toolchain/bin/ptxas --version; \
    python -c "import importlib.metadata as m; \
v = {p: m.version(p) for p in ('nvidia-cuda-tileiras', 'nvidia-cuda-nvcc', 'nvidia-nvvm')}; \
assert len({x.rsplit('.', 1)[0] for x in v.values()}) == 1, f'cuda.tile would not use the pip tileiras: {v}'; \
import torch, triton, cuda.tile, einops; \
assert torch.version.cuda, 'torch is a CPU build'; \
print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'triton', triton.__version__, v)"; \
    pip freeze --all > /opt/ssd-repro-pip-freeze.txt

# Identity of this build, recorded by validation/provenance.py in every results file. Declared after the
# install so that a new commit does not reinstall the stack. SSD_VERSION and SSD_GIT_COMMIT are required
# (the image has no .git and no git); SSD_IMAGE is the tag you build it as (`-t`), recorded as is.
ARG SSD_VERSION
ARG SSD_GIT_COMMIT
ARG SSD_IMAGE=""
ARG SSD_SOURCE=""
LABEL org.opencontainers.image.version="${SSD_VERSION}" \
      org.opencontainers.image.revision="${SSD_GIT_COMMIT}" \
      org.opencontainers.image.source="${SSD_SOURCE}"

# The project, read-only for the run user (root-owned; nothing is written inside it at run time).
COPY . /opt/ssd-repro
WORKDIR /opt/ssd-repro
RUN set -eux; \
    test -n "${SSD_VERSION:-}" || { echo "pass --build-arg SSD_VERSION=<pyproject.toml's version> (README: Container)" >&2; exit 1; }; \
    test -n "${SSD_GIT_COMMIT:-}" || { echo "pass --build-arg SSD_GIT_COMMIT=\"\$(git rev-parse HEAD)\" (README: Container)" >&2; exit 1; }; \
    python -c "import sys, tomllib; \
v = tomllib.load(open('pyproject.toml', 'rb'))['project']['version']; \
sys.exit(None if v == sys.argv[1] else f'SSD_VERSION={sys.argv[1]} but pyproject.toml says {v}')" "${SSD_VERSION}"

# Run-time environment:
# - CUDA_HOME and PATH: the 13.4 compiler chain first. cuda.tile runs the pip tileiras with CUDA_HOME
#   removed and PATH as is, and falls back to a tileiras on PATH or under CUDA_HOME (passing CUDA_HOME
#   on; tileiras then takes that toolkit's ptxas and libnvvm). The base's own CUDA 13.3 in
#   /usr/local/cuda would be found otherwise, and a compile needs one consistent chain (a CUDA_HOME
#   pointing at another toolkit fails every compile).
# - Caches under /tmp, which any uid can write: the project tree is read-only, and HOME is /tmp because a
#   `--user` uid has no home directory. With `--read-only`, mount /tmp as `--tmpfs /tmp:exec` (Triton loads
#   the launchers it compiles there).
# - PYTEST_ADDOPTS: no .pytest_cache or .benchmarks in the read-only tree.
# - SSD_IMAGE, SSD_BASE_IMAGE, SSD_BASE_DIGEST, SSD_GIT_COMMIT: provenance of every results file.
# - SSD_RESULTS: where validation/entrypoint.py makes each run's directory (SSD_RUN_DIR).
ENV PATH="/opt/cutile-toolchain/bin:${PATH}" \
    CUDA_HOME=/opt/cutile-toolchain \
    HOME=/tmp \
    XDG_CACHE_HOME=/tmp/.cache \
    TRITON_HOME=/tmp \
    TRITON_CACHE_DIR=/tmp/.cache/triton \
    CUDA_TILE_CACHE_DIR=/tmp/.cache/cuda-tile \
    TORCHINDUCTOR_CACHE_DIR=/tmp/.cache/torchinductor \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTEST_ADDOPTS="-p no:cacheprovider --benchmark-storage=file:///tmp/.cache/benchmarks" \
    SSD_IMAGE="${SSD_IMAGE}" \
    SSD_BASE_IMAGE="${CUDA_BASE_IMAGE}" \
    SSD_BASE_DIGEST="${CUDA_BASE_DIGEST}" \
    SSD_GIT_COMMIT="${SSD_GIT_COMMIT}" \
    SSD_RESULTS=/results

USER 10001:10001

# The entrypoint refuses to start when nothing is mounted on /results (the results would vanish with the
# container) unless -e SSD_RESULTS_IN_CONTAINER=1; it makes a new run directory, /results/<UTC time>
# (or -e SSD_RUN_DIR=...), prints it, and runs the command, by default the suite's main job.
ENTRYPOINT ["python", "/opt/ssd-repro/validation/entrypoint.py"]
CMD ["nox", "--no-venv", "-s", "validate"]
