"""Corrections that travel with a run's data: ``<run_dir>/errata.json``, beside ``raw/``.

A results file is never edited after its run, so a label found wrong later (say, the length an autotuner
tuned at) is corrected in a small file next to it. The run's page shows each erratum under its title and
uses the corrected value wherever the field is shown (marked, with the recorded value beside it); the
index lists the run's errata. The renderer copies the file beside the report with the raw files.

    {"schema_version": 1,
     "errata": [{"date": "2026-12-01", "title": "one line", "text": "what was wrong, why, what is right",
                 "corrections": [{"suite": "benchmark", "impl": "triton", "dstate": [64, 128, 256],
                                  "field": "triton_tuned_at", "recorded": 16384, "value": 1024}]}]}

A correction selects the cases of ``suite`` with that ``impl`` (and, when given, a ``dstate`` in the list);
each must hold ``recorded`` in ``field``, else the erratum does not describe this data and is refused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reports.markup import ReportError
from validation.schema import SchemaError, check_strings, read_json, show_value

__all__ = ["ERRATA_FILE", "Correction", "Erratum", "corrected", "load_errata"]

ERRATA_FILE = "errata.json"
KNOWN_ERRATA_VERSIONS = (1,)


@dataclass(frozen=True)
class Correction:
    suite: str
    impl: str
    dstates: tuple[int, ...] | None
    field: str
    recorded: Any
    value: Any

    def applies(self, suite: str, case: dict[str, Any]) -> bool:
        dstate = (case.get("shape") or {}).get("dstate")
        return (suite == self.suite and case.get("impl") == self.impl
                and (self.dstates is None or dstate in self.dstates))


@dataclass(frozen=True)
class Erratum:
    number: int
    date: str
    title: str
    text: str
    corrections: tuple[Correction, ...]


def _need(entry: dict[str, Any], key: str, kind: type, path: Path) -> Any:
    value = entry.get(key)
    if not isinstance(value, kind):
        raise ReportError(f"{path}: each erratum needs {key!r} ({kind.__name__}); got {show_value(value)}")
    return value


def load_errata(directory: Path, files: dict[str, dict[str, Any]]) -> tuple[Erratum, ...]:
    """The errata of the run in ``directory`` (none when it has no errata.json), checked against its cases."""
    path = directory / ERRATA_FILE
    if not os.path.lexists(path):  # a directory, a FIFO or a dangling link there is refused, not "no errata"
        return ()
    try:  # read as a results file is: one line for anything unreadable, a key twice, text a page cannot show
        payload, _ = read_json(path)
        check_strings(payload, path)
    except SchemaError as err:
        raise ReportError(str(err)) from None
    if not isinstance(payload, dict) or payload.get("schema_version") not in KNOWN_ERRATA_VERSIONS:
        raise ReportError(f"{path}: expected an object with schema_version in {KNOWN_ERRATA_VERSIONS} and 'errata'")
    entries = payload.get("errata")
    if not isinstance(entries, list) or not entries:
        raise ReportError(f"{path}: expected 'errata' to be a non-empty list")
    out = []
    for number, entry in enumerate(entries, 1):
        if not isinstance(entry, dict):
            raise ReportError(f"{path}: each erratum must be an object; got {show_value(entry)}")
        corrections = []
        for c in entry.get("corrections") or []:
            if not isinstance(c, dict) or not all(isinstance(c.get(k), str) for k in ("suite", "impl", "field")):
                raise ReportError(f"{path}: a correction needs suite, impl and field (text); got {show_value(c)}")
            dstates = c.get("dstate")
            if dstates is not None and not (isinstance(dstates, list) and all(isinstance(d, int) for d in dstates)):
                raise ReportError(f"{path}: a correction's dstate must be a list of ints; got {show_value(dstates)}")
            corr = Correction(c["suite"], c["impl"], tuple(dstates) if dstates else None, c["field"],
                              c.get("recorded"), c.get("value"))
            hits = [case for case in (files.get(corr.suite) or {}).get("cases", []) if corr.applies(corr.suite, case)]
            if not hits:
                raise ReportError(f"{path}: correction {show_value(c)} matches no case of this run")
            wrong = [case["id"] for case in hits if case.get(corr.field) != corr.recorded]
            if wrong:
                raise ReportError(f"{path}: correction {show_value(c)}: {len(wrong)} matching case(s) do not "
                                  f"record {corr.field}={show_value(corr.recorded)}, e.g. {wrong[0]}")
            corrections.append(corr)
        out.append(Erratum(number, _need(entry, "date", str, path), _need(entry, "title", str, path),
                           _need(entry, "text", str, path), tuple(corrections)))
    return tuple(out)


def corrected(errata: tuple[Erratum, ...], suite: str, case: dict[str, Any],
              field: str) -> tuple[Any, Erratum | None]:
    """(the value to show for ``case[field]``, the erratum that corrected it or None)."""
    for erratum in errata:
        for corr in erratum.corrections:
            if corr.field == field and corr.applies(suite, case):
                return corr.value, erratum
    return case.get(field), None
