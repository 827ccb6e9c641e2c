"""What the TileGym decisions of a benchmark file say: whether a timed TileGym case ran a configuration that no
autotune chose, and what turns such cases into tuned ones.

``validation.bench.tilegym_tuning`` writes each case's decisions (``tilegym_tuning``, one per kernel, each with its
``source``); the run's summary and the report's verdict read them here. Imports nothing but the standard library, so
that the report renders where only Jinja2 is installed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from validation.schema import CaseRecord

__all__ = ["FIRST_CONFIG", "TUNE_COMMAND", "TUNE_EFFECT", "TUNE_HINT", "UNTUNED_WHY", "ran_untuned", "untuned_count"]

# A decision's source where no choice was stored for the key (device, versions, kernel, problem) in mode cached.
FIRST_CONFIG = "no stored choice: TileGym's first config"
# What turns a run's untuned TileGym cases (``ran_untuned``) into tuned ones.
TUNE_COMMAND = "nox -s benchmark -- --impl tilegym --tilegym-tuning tune"
TUNE_EFFECT = ("tunes TileGym on this machine and stores its choices for later runs (minutes a shape, most of it "
               "compiling, which the run does first in parallel for its points without a stored choice; on an H100 a "
               "point's search then took 5-23 s)")
TUNE_HINT = f"`{TUNE_COMMAND}` {TUNE_EFFECT}"
# Why a case ran untuned, as the summary and the report say it.
UNTUNED_WHY = "no choice stored for this GPU and stack, or autotune off"


def ran_untuned(decisions: object, mode: object) -> bool:
    """Whether a timed TileGym case ran a configuration that no autotune chose: the run's ``mode`` is ``off``, or one
    of the case's ``decisions`` (its ``tilegym_tuning`` record, one per kernel) found no stored choice and took
    TileGym's first config. Its times then stand for an untuned TileGym, on a GPU or a stack the stored choices do not
    cover (the shipped table covers the H200 that tuned it)."""
    if mode == "off":
        return True
    return isinstance(decisions, list) and any(isinstance(d, dict) and d.get("source") == FIRST_CONFIG
                                               for d in decisions)


def untuned_count(cases: Iterable[CaseRecord], tuning: object) -> tuple[int, int]:
    """(untuned, timed): of the timed TileGym cases among a benchmark file's ``cases`` (a kernel time's median
    recorded), how many ran a configuration no autotune chose (:func:`ran_untuned`); ``tuning`` is the file's own
    ``tilegym_tuning`` record, whose ``mode`` holds for all of them."""
    mode = tuning.get("mode") if isinstance(tuning, dict) else None
    timed = [c for c in cases if c.impl == "tilegym"
             and isinstance(kernel := c.measured.get("kernel_us"), dict) and kernel.get("median") is not None]
    return sum(ran_untuned(c.measured.get("tilegym_tuning"), mode) for c in timed), len(timed)
