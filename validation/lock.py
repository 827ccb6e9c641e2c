"""Does this environment hold exactly the locked stack?

    python -m validation.lock        # exit 0 when it does; else one line per difference, exit 1

``requirements.lock`` (made by ``nox -s lock`` from constraints.txt) pins every package the image installs,
transitive ones included, with environment markers where a version depends on the Python or the platform.
The packages installed without their dependencies (mamba-ssm, tilegym) are not in it; their pins are
constraints.txt's. The check: every lock line whose marker holds here is installed at its version, and
every installed distribution (pip aside) is one of those or pinned in constraints.txt at its version.
``nox -s container`` runs it inside the image it built.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement

__all__ = ["differences", "installed", "locked"]

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
CONSTRAINTS = ROOT / "constraints.txt"
UNLOCKED = {"pip"}  # the venv's own installer, from the interpreter's ensurepip


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked(text: str, environment: dict[str, str] | None = None) -> dict[str, str]:
    """``name == version`` lines of a lock or constraints text whose markers hold, by normalized name."""
    pins: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator != "==":
            raise ValueError(f"line {number}: {line!r} is not pinned with == to one version")
        if req.marker is None or Marker(str(req.marker)).evaluate(environment):
            pins[_name(req.name)] = specs[0].version
    return pins


def installed() -> dict[str, str]:
    return {_name(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()}


def differences(lock: dict[str, str], constraints: dict[str, str], have: dict[str, str]) -> list[str]:
    """What separates ``have`` from the lock (plus constraints' pins for what the lock leaves out)."""
    out = [f"{name}: locked {version}, installed {have.get(name, 'nothing')}"
           for name, version in sorted(lock.items()) if have.get(name) != version]
    for name, version in sorted(have.items()):
        if name in lock or name in UNLOCKED:
            continue
        if name not in constraints:
            out.append(f"{name}=={version} is installed but neither locked nor pinned")
        elif constraints[name] != version:
            out.append(f"{name}: pinned {constraints[name]} in constraints.txt, installed {version}")
    return out


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m validation.lock", description=__doc__.split("\n\n")[0],
                            epilog="Exit 0 when it does; else one line per difference, exit 1.").parse_args(argv)
    found = differences(locked(LOCK.read_text()), locked(CONSTRAINTS.read_text()), installed())
    for line in found:
        print(line)
    where = f"Python {sys.version.split()[0]} at {sys.prefix}"
    if found:
        print(f"{len(found)} difference(s) between {where} and {LOCK.name}", file=sys.stderr)
        return 1
    print(f"{where} holds exactly {LOCK.name} (+ constraints.txt's no-deps pins)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
