"""Which headless Chromium the report's browser checks use.

    python -m validation.browser        # prints the browser's path, or says what is missing (exit 1)

``$SSD_BROWSER`` wins when set; otherwise the first of the usual Chromium and Chrome names on PATH.
``nox -s tests`` asks this module first, and when nothing is found it fetches Playwright's Chromium into
its virtualenv's cache and passes it on as ``$SSD_BROWSER`` (noxfile.py). Where that fails too (no
network), the browser tests are skipped with the reason, except under ``SSD_REQUIRE_BROWSER=1`` (CI), where
a missing browser fails them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

__all__ = ["MISSING", "REQUIRE_ENV", "find_browser"]

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
REQUIRE_ENV = "SSD_REQUIRE_BROWSER"
MISSING = ("no headless Chromium: none of " + ", ".join(NAMES) + " is on PATH and $SSD_BROWSER is unset. Install"
           " one (Debian/Ubuntu: `apt-get install chromium`) or point SSD_BROWSER at a Chrome or Chromium binary")


def find_browser() -> tuple[str | None, str]:
    """(path, where it came from), or (None, what is missing)."""
    given = os.environ.get("SSD_BROWSER")
    if given:
        path = Path(given)
        if path.is_file() and os.access(path, os.X_OK):
            return str(path), "SSD_BROWSER"
        return None, f"SSD_BROWSER={given} is not an executable file"
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found, f"{name} on PATH"
    return None, MISSING


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m validation.browser", description=__doc__.split("\n\n")[0],
                            epilog="Prints the browser's path ($SSD_BROWSER, else the first Chromium or Chrome on "
                                   "PATH), or says what is missing (exit 1).").parse_args(argv)
    path, why = find_browser()
    if path is None:
        print(why, file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
