"""The results contract (docs/design.md, "Results contract") as code: its constants, defined here once, and the
validator every reader of a results file goes through.

Writers build every case as a :class:`CaseRecord`, the only thing ``validation.results.ResultsFile.add``
takes; it is checked when built, by the same checker as a file's cases, so that a bad record is refused where
it is made (:class:`SchemaError` naming the field and the value), not when a reader meets it. Readers (the
report, its comparison, the run summary) load a file with :func:`load_results`, which refuses anything that
does not fit the contract with one line naming the file, the field and the value (:class:`SchemaError`). What
a reader gets back is then safe to format: every number is finite-or-a-NaN/Inf string and within float range,
every shape a positive int, every status known, every version and commit a safe name, every text encodable
and free of control characters (none at all in a name: an id, an implementation), every case id once.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, get_args

__all__ = ["CASE_FIELDS", "COMMIT_PATTERN", "HEADLINE", "KNOWN_SCHEMA_VERSIONS", "SCHEMA_VERSION", "SHAPE_KEYS",
           "STATUSES", "SUITES", "SUITE_VERSION_PATTERN", "CaseRecord", "ResultsDoc", "SchemaError", "Status",
           "check_results", "check_strings", "jsonable", "load_results", "printable", "read_json", "show_value", "utc"]

SCHEMA_VERSION = 1
KNOWN_SCHEMA_VERSIONS = (1,)
# In the order a run makes them (and a report and a summary list them).
SUITES = ("compile", "reference", "correctness", "stability", "benchmark")
Status = Literal["pass", "fail", "unsupported", "crashed", "not-run"]
STATUSES: tuple[str, ...] = get_args(Status)
SHAPE_KEYS = ("batch", "seqlen", "nheads", "headdim", "ngroups", "dstate", "chunk_size")
# The post's headline shape: batch 4, 16384 tokens, 8 heads, headdim 64, dstate 128, chunk 128.
HEADLINE = {"batch": 4, "seqlen": 16384, "nheads": 8, "headdim": 64, "ngroups": 1, "dstate": 128, "chunk_size": 128}
# A suite version becomes part of a folder name: ASCII digits and dots, with an optional PEP 440 pre/post/dev
# tail (at most one of each). \Z, not $: $ also matches before a final newline.
SUITE_VERSION_PATTERN = re.compile(r"^[0-9]{1,6}(\.[0-9]{1,6}){1,3}((a|b|rc|\.post|\.dev)[0-9]{1,6}){0,3}\Z")
COMMIT_PATTERN = re.compile(r"^[0-9a-f]{7,64}\Z")
# Text is shown on a page (written as UTF-8: a lone surrogate fails the write) and printed to a terminal (a control
# character can move the cursor and forge a line). Prose (a reason, a note) keeps tab, newline and carriage return;
# a name (an id, an implementation, a dtype; validation.summary prints them as they are) has no control character,
# no line or paragraph separator and no bidirectional override at all.
_BAD_IN_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_BAD_IN_NAME = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_TEXT = "text without control characters (but tab, newline, carriage return) or lone surrogates"
_NAME = "a name without control characters, line separators, bidirectional overrides or lone surrogates"
MAX_DEPTH = 32
NUMBER_STRINGS = ("nan", "inf", "-inf")
# Case fields holding a measured number (or its NaN/Inf string, or null with a reason).
CASE_NUMBERS = ("y_rel_l2", "y_max_abs", "y_max_abs_over_peak", "state_rel_l2", "state_max_abs",
                "state_max_abs_over_peak", "first_call_s", "compile_s", "floor_us", "floor_design_us", "input_check_us",
                "duration_s", "wall_s")
TIMING_FIELDS = ("kernel_us", "wall_us")
QUANTITY_FIELDS = {"y": "y", "final_state": "state"}  # a tolerance's quantity -> its errors' field prefix
MAX_TEXT = 100_000  # a reason or id longer than this is not a record but a mistake


def jsonable(value: object) -> object:
    """``value`` as a results file holds it: JSON has no NaN or Inf, so they are the strings "nan", "inf",
    "-inf"; a tuple is a list; a read-only mapping a dict."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, Mapping):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


class SchemaError(ValueError):
    """A results file (or a case record being built) that does not fit the contract: the message names the file,
    the field and the value."""


def show_value(value: object) -> str:
    """``value`` as a one-line message shows it: its repr (every control character and surrogate escaped), cut to
    80 characters; a huge integer by its number of digits."""
    if isinstance(value, int) and abs(value) >= 10**30:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class _Checker:
    def __init__(self, path: Path | str) -> None:
        self.path = path

    def fail(self, field: str, expected: str, value: object) -> SchemaError:
        return SchemaError(f"{self.path}: {field}: expected {expected}, got {show_value(value)}")

    def text(self, field: str, value: object, *, empty: bool = False, name: bool = False) -> str:
        """A string; ``name``: one that names something (an id, an implementation), without any control character."""
        if not isinstance(value, str) or (not empty and not value) or len(value) > MAX_TEXT:
            raise self.fail(field, "a non-empty string" if not empty else "a string", value)
        if (_BAD_IN_NAME if name else _BAD_IN_TEXT).search(value):
            raise self.fail(field, _NAME if name else _TEXT, value)
        return value

    def opt_text(self, field: str, value: object) -> None:
        if value is not None:
            self.text(field, value, empty=True)

    def integer(self, field: str, value: object, *, low: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or abs(value) > 2**63:
            raise self.fail(field, "an integer", value)
        if low is not None and value < low:
            raise self.fail(field, f"an integer >= {low}", value)
        return value

    def number(self, field: str, value: object) -> None:
        """A JSON number within float range, or "nan"/"inf"/"-inf", or null."""
        if value is None or value in NUMBER_STRINGS:
            return
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(field, 'a number, "nan", "inf", "-inf" or null', value)
        if isinstance(value, int) and abs(value) > 2**1000 or isinstance(value, float) and not math.isfinite(value):
            raise self.fail(field, "a number within float range", value)

    def mapping(self, field: str, value: object, *, null: bool = False) -> dict[str, Any]:
        if value is None and null:
            return {}
        if not isinstance(value, dict):
            raise self.fail(field, "an object" + (" or null" if null else ""), value)
        return value

    def text_map(self, field: str, value: object) -> None:
        for key, item in self.mapping(field, value, null=True).items():
            self.opt_text(f"{field}.{key}", item)

    def time(self, field: str, value: object) -> None:
        text = self.text(field, value)
        try:
            utc(text)
        except (ValueError, OverflowError):  # OverflowError: 0001-01-01T00:00+01:00 is before year 1 in UTC
            raise self.fail(field, "an ISO 8601 time that has a UTC time", value) from None

    def deep_text(self, field: str, value: object, depth: int = 0) -> None:
        """Anywhere in ``value``: every string and every key text (:meth:`text`'s rule), so that a message may name a
        key and a page may show any string."""
        if depth > MAX_DEPTH:
            raise self.fail(field, f"nesting at most {MAX_DEPTH} deep", "deeper")
        if isinstance(value, str):
            if _BAD_IN_TEXT.search(value):
                raise self.fail(field or "the file", _TEXT, value)
        elif isinstance(value, dict):
            for key, item in value.items():
                if _BAD_IN_TEXT.search(key):
                    raise self.fail(f"a key of {field or 'the file'}", _TEXT, key)
                self.deep_text(f"{field}.{key}" if field else key, item, depth + 1)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                self.deep_text(f"{field}[{i}]", item, depth + 1)

    def deep_numbers(self, field: str, value: object, depth: int = 0) -> None:
        """Anywhere in ``value``: no integer beyond float range (it would overflow where formatted)."""
        if depth > MAX_DEPTH:
            raise self.fail(field, f"nesting at most {MAX_DEPTH} deep", "deeper")
        if isinstance(value, int) and not isinstance(value, bool):
            self.number(field, value)
        elif isinstance(value, dict):
            for key, item in value.items():
                self.deep_numbers(f"{field}.{key}", item, depth + 1)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                self.deep_numbers(f"{field}[{i}]", item, depth + 1)

    def timing(self, field: str, value: object) -> None:
        stats = self.mapping(field, value, null=True)
        for key in ("median", "p10", "p90", "rel_std", "mean", "min", "max"):
            self.number(f"{field}.{key}", stats.get(key))
        if stats.get("reps") is not None:
            self.integer(f"{field}.reps", stats["reps"], low=0)
        samples = stats.get("samples")
        if samples is not None:
            if not isinstance(samples, list):
                raise self.fail(f"{field}.samples", "a list of numbers", samples)
            for i, item in enumerate(samples):
                self.number(f"{field}.samples[{i}]", item)

    def gpu_clocks(self, field: str, value: object) -> None:
        """What the GPU's clock did while a case was timed (validation.bench.clocks), or why that is unknown."""
        clocks = self.mapping(field, value)
        if "unavailable" in clocks:
            self.text(f"{field}.unavailable", clocks["unavailable"])
            return
        self.integer(f"{field}.samples", clocks.get("samples"), low=1)
        for key in ("sm_mhz_min", "sm_mhz_median", "sm_mhz_max", "sm_mhz_max_supported", "power_w_max"):
            self.number(f"{field}.{key}", clocks.get(key))
        reasons = clocks.get("reasons")
        if not isinstance(reasons, list):
            raise self.fail(f"{field}.reasons", "a list of strings", reasons)
        for i, reason in enumerate(reasons):
            self.text(f"{field}.reasons[{i}]", reason)

    def length_scaling(self, value: object) -> None:
        """The benchmark's two longest lengths timed again in the same rounds (validation.bench.run.length_scaling)."""
        scaling = self.mapping("length_scaling", value)
        self.text("length_scaling.what", scaling.get("what"))
        self.opt_text("length_scaling.not_measured", scaling.get("not_measured"))
        if scaling.get("not_measured_at") is not None:
            self.text_map("length_scaling.not_measured_at", scaling["not_measured_at"])
        rows = scaling.get("rows")
        if not isinstance(rows, list):
            raise self.fail("length_scaling.rows", "a list of row objects", rows)
        if not rows:
            if not scaling.get("not_measured") and not scaling.get("not_measured_at"):
                raise self.fail("length_scaling", "rows, or why none was measured (not_measured)", scaling)
            return
        seqlens = scaling.get("seqlens")
        if not isinstance(seqlens, list) or len(seqlens) != 2:
            raise self.fail("length_scaling.seqlens", "the two lengths, shortest first", seqlens)
        short, long = (self.integer(f"length_scaling.seqlens[{i}]", n, low=1) for i, n in enumerate(seqlens))
        if short >= long:
            raise self.fail("length_scaling.seqlens", "the two lengths, shortest first", seqlens)
        for i, row in enumerate(rows):
            where = f"length_scaling.rows[{i}]"
            row = self.mapping(where, row)
            self.text(f"{where}.impl", row.get("impl"), name=True)
            self.integer(f"{where}.dstate", row.get("dstate"), low=1)
            if row.get("long_over_short") is None:
                raise self.fail(f"{where}.long_over_short", "a number", None)
            self.number(f"{where}.long_over_short", row["long_over_short"])
            for key in ("kernel_us", "ns_per_token"):
                per_length = self.mapping(f"{where}.{key}", row.get(key))
                if sorted(per_length) != sorted((str(short), str(long))):
                    raise self.fail(f"{where}.{key}", f"one entry for each of {short} and {long}", per_length)
                for seqlen, item in per_length.items():
                    if key == "kernel_us":
                        self.timing(f"{where}.{key}.{seqlen}", item)
                    else:
                        self.number(f"{where}.{key}.{seqlen}", item)
            self.gpu_clocks(f"{where}.gpu_clocks", row.get("gpu_clocks"))

    def case(self, where: str, case: object) -> None:
        """One case; ``where`` names it in a message (``cases[3]``), followed by its id once that is known."""
        c = self.mapping(where, case)
        cid = self.text(f"{where}.id", c.get("id"), name=True)
        where = f"{where} ({cid[:60]})"
        self.text(f"{where}.impl", c.get("impl"), name=True)
        status = c.get("status")
        if status not in STATUSES:
            raise self.fail(f"{where}.status", f"one of {', '.join(STATUSES)}", status)
        if status != "pass":
            self.text(f"{where}.reason", c.get("reason"))
        else:
            self.opt_text(f"{where}.reason", c.get("reason"))
        if "shape" in c:
            shape = self.mapping(f"{where}.shape", c["shape"], null=True)
            for key, value in shape.items():
                if key in SHAPE_KEYS:
                    self.integer(f"{where}.shape.{key}", value, low=1)
        for key in ("dtype", "regime", "variant", "tag", "oracle", "matmul"):
            if not isinstance(c.get(key), str | None):
                raise self.fail(f"{where}.{key}", "a string or null", c[key])
            if c.get(key) is not None:
                self.text(f"{where}.{key}", c[key], empty=True, name=True)
        for key in ("with_D", "with_initial_state"):
            if not isinstance(c.get(key), bool | None):
                raise self.fail(f"{where}.{key}", "true, false or null", c[key])
        for key in ("seed", "nonfinite", "triton_tuned_at"):
            if c.get(key) is not None:
                self.integer(f"{where}.{key}", c[key], low=0)
        for key in CASE_NUMBERS:
            self.number(f"{where}.{key}", c.get(key))
        for key in TIMING_FIELDS:
            self.timing(f"{where}.{key}", c.get(key))
        self.text_map(f"{where}.null_reasons", c.get("null_reasons"))
        if "tolerance" in c:
            for quantity, row in self.mapping(f"{where}.tolerance", c["tolerance"], null=True).items():
                row = self.mapping(f"{where}.tolerance.{quantity}", row)
                for key in ("rel_l2", "max_abs"):
                    self.number(f"{where}.tolerance.{quantity}.{key}", row.get(key))
                self.opt_text(f"{where}.tolerance.{quantity}.reason", row.get("reason"))
                if status == "pass":
                    self.within_bound(where, c, quantity, row)
        if c.get("gpu_clocks") is not None:
            self.gpu_clocks(f"{where}.gpu_clocks", c["gpu_clocks"])
        if "tilegym_tuning" in c and not isinstance(c["tilegym_tuning"], list | None):
            raise self.fail(f"{where}.tilegym_tuning", "a list or null", c["tilegym_tuning"])

    def within_bound(self, where: str, case: dict, quantity: str, row: dict) -> None:
        """A ``pass`` judged against ``row`` (its recorded bound for ``quantity``) must carry that quantity's errors,
        each a finite number within its bound: a missing, NaN or over-bound error is a failure the file calls a pass."""
        prefix = QUANTITY_FIELDS.get(quantity)
        if prefix is None:
            raise self.fail(f"{where}.tolerance.{quantity}", f"one of {', '.join(QUANTITY_FIELDS)}", quantity)
        for error, bound in ((f"{prefix}_rel_l2", "rel_l2"), (f"{prefix}_max_abs_over_peak", "max_abs")):
            value, limit = case.get(error), row.get(bound)
            if not isinstance(limit, int | float):
                raise self.fail(f"{where}.tolerance.{quantity}.{bound}",
                                "a finite number (the bound a pass was judged by)", limit)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value <= limit:
                raise self.fail(f"{where}.{error}", f"a finite number <= {limit:g} (tolerance.{quantity}.{bound}) in a"
                                " case whose status is pass", value)

    def environment(self, value: object) -> None:
        env = self.mapping("environment", value, null=True)
        if env.get("suite_version") is not None:
            self.suite_version("environment.suite_version", env["suite_version"])
        commit = env.get("git_commit")
        if commit is not None and not (isinstance(commit, str) and COMMIT_PATTERN.match(commit)):
            raise self.fail("environment.git_commit", "null or 7-64 lowercase hex digits", commit)
        if not isinstance(env.get("git_dirty"), bool | None):
            raise self.fail("environment.git_dirty", "true, false or null", env["git_dirty"])
        for key in ("gpu_name", "compute_capability", "driver", "torch", "container_image"):
            if env.get(key) is not None and not isinstance(env[key], str | int | float):
                raise self.fail(f"environment.{key}", "a string, a number or null", env[key])
        self.text_map("environment.null_reasons", env.get("null_reasons"))

    def suite_version(self, field: str, value: object) -> str:
        if not isinstance(value, str) or not SUITE_VERSION_PATTERN.match(value):
            raise self.fail(field, "a version such as 0.1.0 (digits and dots; it names a folder)", value)
        return value


# The fields every suite's cases share, in the order a record writes them when built (not read): its identity
# and its inputs first, then what the suite measured (``CaseRecord.measured``, in the order given), then the
# verdict.
_LEADING = ("id", "impl", "shape", "dtype", "regime", "seed", "tag", "with_D", "with_initial_state", "oracle",
            "variant")
_TRAILING = ("status", "reason")


@dataclass(frozen=True)
class CaseRecord:
    """One case of a results file (docs/design.md, "Results contract"): the only way a writer makes one
    (``ResultsFile.add`` takes nothing else), checked as it is built by the checker :func:`load_results` runs on
    every case of a file; a bad field raises :class:`SchemaError` naming the field and the value.

    The fields every suite shares are typed; ``None`` is "not recorded" (no key in the file). What a suite
    measures beside them (errors against the oracle, tolerances, timings, floors, per-kernel times, compile
    times, TileGym's tuning, ...) is in ``measured``, under the names the file uses. :meth:`as_dict` is the
    record as the file holds it; :meth:`from_dict` reads one back (keeping its keys' order), so that
    ``CaseRecord.from_dict(case).as_dict() == case`` for every case of a valid file.
    """

    id: str
    impl: str
    status: Status
    reason: str | None = None  # required unless status is "pass": why it failed, was refused, did not run
    shape: Mapping[str, int] | None = None  # SHAPE_KEYS -> a positive int
    dtype: str | None = None
    regime: str | None = None
    seed: int | None = None
    tag: str | None = None  # the matrix's name for the case (its id without the implementation)
    with_D: bool | None = None
    with_initial_state: bool | None = None
    oracle: str | None = None  # what the case was judged against
    variant: str | None = None  # an ablation of ours (kernels.cutile.tuning.VARIANTS)
    measured: Mapping[str, Any] = field(default_factory=dict)
    # The order of the keys in the file the record was read from (from_dict); empty: _LEADING, measured, _TRAILING.
    key_order: tuple[str, ...] = field(default=(), compare=False, repr=False)
    # True only where the case as the file holds it has just passed check_results (ResultsDoc.from_payload): the
    # checks below would repeat its case checks, more than half the time it takes to load a run.
    _checked: InitVar[bool] = False

    def __post_init__(self, _checked: bool) -> None:
        check = _Checker("CaseRecord")
        if not isinstance(self.measured, Mapping):
            raise check.fail("measured", "a mapping of field names to values", self.measured)
        clash = sorted(set(self.measured) & set(CASE_FIELDS))
        if clash:
            raise check.fail(f"measured.{clash[0]}", f"no field of the record's own (give it as {clash[0]}=)",
                             self.measured[clash[0]])
        if isinstance(self.shape, Mapping):
            object.__setattr__(self, "shape", MappingProxyType(dict(self.shape)))
        # Prose a writer takes from elsewhere (a child's stderr, an exception's message, a compiler's log) may hold a
        # terminal's escape or a stray surrogate, which a file must not: written escaped, so that the case is recorded
        # rather than lost to a refusal. A name (id, impl, ...) is the suite's own: refused below if it holds one.
        if not _checked:  # a checked file's text holds none of them
            object.__setattr__(self, "reason", printable(self.reason))
        object.__setattr__(self, "measured", MappingProxyType(
            dict(self.measured) if _checked else {k: printable(v) for k, v in self.measured.items()}))
        object.__setattr__(self, "key_order", tuple(self.key_order))
        if self.key_order:
            present = {k for k in CASE_FIELDS if getattr(self, k) is not None} | set(self.measured)
            if len(set(self.key_order)) != len(self.key_order) or not present <= set(self.key_order) or \
                    not set(self.key_order) <= present | set(CASE_FIELDS):
                raise check.fail("key_order", f"each of the record's keys once ({', '.join(sorted(present))})",
                                 self.key_order)
        if _checked:
            return
        case = jsonable(self.as_dict())
        check.deep_text("case", case)
        check.case("case", case)
        check.deep_numbers(f"case ({self.id})", case)

    def as_dict(self) -> dict[str, Any]:
        """The record as a results file holds it (NaN and Inf still floats: the writer spells them)."""
        def value(key: str) -> Any:
            got = getattr(self, key) if key in CASE_FIELDS else self.measured[key]
            return dict(got) if key == "shape" and isinstance(got, Mapping) else got

        keys = self.key_order or (*(k for k in _LEADING if getattr(self, k) is not None), *self.measured,
                                  *(k for k in _TRAILING if getattr(self, k) is not None))
        return {key: value(key) for key in keys}

    @classmethod
    def from_dict(cls, case: Mapping[str, Any], path: Path | str | None = None, where: str = "case", *,
                  _checked: bool = False) -> CaseRecord:
        """A case as a results file (or a child process's line) holds it; its keys keep their order. ``path`` and
        ``where`` (``cases[3]``): the file and the place a refusal names, as :func:`load_results` names them."""
        if path is not None:
            _Checker(path).deep_text(where, jsonable(case))
            _Checker(path).case(where, jsonable(case))
        if not isinstance(case, Mapping):
            raise _Checker("CaseRecord").fail("case", "an object", case)
        own = {"id": None, "impl": None, "status": None, **{k: v for k, v in case.items() if k in CASE_FIELDS}}
        return cls(**own, measured={k: v for k, v in case.items() if k not in CASE_FIELDS}, key_order=tuple(case),
                   _checked=_checked)

    def with_measured(self, **measured: Any) -> CaseRecord:
        """This record with ``measured`` fields added (after the others) or changed: e.g. a time taken later."""
        order = (*self.key_order, *(k for k in measured if k not in self.key_order)) if self.key_order else ()
        return CaseRecord(**{k: getattr(self, k) for k in CASE_FIELDS}, measured={**self.measured, **measured},
                          key_order=order)


# The typed fields of a case, the same in every suite (the rest of a case is CaseRecord.measured).
CASE_FIELDS = (*_LEADING, *_TRAILING)
if set(CASE_FIELDS) != {f.name for f in fields(CaseRecord)} - {"measured", "key_order"}:
    raise AssertionError("CASE_FIELDS and CaseRecord's fields differ")


def check_results(payload: object, path: Path | str, suite: str | None = None) -> dict[str, Any]:
    """``payload`` (a parsed results file) if it fits the contract, else :class:`SchemaError`; ``suite`` is what
    the file's name says it holds."""
    check = _Checker(path)
    data = check.mapping("the file", payload)
    check.deep_text("", data)  # first: the messages below may name a key or an id
    version = data.get("schema_version")
    if isinstance(version, bool) or version not in KNOWN_SCHEMA_VERSIONS:
        raise check.fail("schema_version", f"one this reader knows ({', '.join(map(str, KNOWN_SCHEMA_VERSIONS))})",
                         version)
    if data.get("suite") not in SUITES:
        raise check.fail("suite", f"one of {', '.join(SUITES)}", data.get("suite"))
    if suite is not None and data["suite"] != suite:
        raise check.fail("suite", f"{suite!r}, as the file's name says", data["suite"])
    check.time("created", data.get("created"))
    if data.get("finished") is not None:
        check.time("finished", data["finished"])
    check.environment(data.get("environment"))
    env_version = (data.get("environment") or {}).get("suite_version")
    check.suite_version("suite_version", data.get("suite_version") or env_version)
    if "summary" in data:
        for key, value in check.mapping("summary", data["summary"], null=True).items():
            check.integer(f"summary.{key}", value, low=0)
    cases = data.get("cases")
    if not isinstance(cases, list):
        raise check.fail("cases", "a list of case objects", cases)
    first: dict[str, int] = {}
    for i, case in enumerate(cases):
        check.case(f"cases[{i}]", case)
        # A reader keys cases by id (reports.compare): a second record of an id would hide the first.
        j = first.setdefault(case["id"], i)
        if j != i:
            raise check.fail(f"cases[{i}].id", f"an id no other case has (cases[{j}] has it)", case["id"])
    if data.get("interrupted") is not None:  # the signal that stopped the run (validation.summary says it)
        check.text("interrupted", data["interrupted"], name=True)
    notes = data.get("notes")
    if notes is not None and not (isinstance(notes, list) and all(isinstance(n, str) for n in notes)):
        raise check.fail("notes", "a list of strings", notes)
    for key in ("compile_phase", "triton_tuning", "published_ratios", "ceilings", "timing"):
        if data.get(key) is not None:
            check.mapping(key, data[key])
    phase = data.get("compile_phase") or {}
    if phase.get("failed") is not None:
        check.text_map("compile_phase.failed", phase["failed"])
    points = (data.get("published_ratios") or {}).get("points")
    if isinstance(points, list):
        for i, point in enumerate(points):
            point = check.mapping(f"published_ratios.points[{i}]", point)
            for key in ("seqlen", "dstate"):
                check.integer(f"published_ratios.points[{i}].{key}", point.get(key), low=1)
            if point.get("ratio") is None:
                raise check.fail(f"published_ratios.points[{i}].ratio", "a number", None)
            check.number(f"published_ratios.points[{i}].ratio", point.get("ratio"))
    if data.get("length_scaling") is not None:
        check.length_scaling(data["length_scaling"])
    if isinstance(data.get("tilegym_tuning"), list | int | float | bool):
        raise check.fail("tilegym_tuning", "an object or a string", data["tilegym_tuning"])
    check.deep_numbers("the file", data)
    return data


# The top-level fields every results file has (ResultsFile writes them); the rest is the suite's own.
_HEADER = ("schema_version", "suite", "suite_version", "created", "finished", "environment", "summary", "notes",
           "cases")


@dataclass(frozen=True)
class ResultsDoc:
    """A results file as a reader gets it from :func:`load_results`, checked: its header typed, its cases
    :class:`CaseRecord` s, and the suite's own top-level fields (the benchmark's ceilings, published_ratios,
    compile_phase, triton_tuning, tilegym_tuning, ...; interrupted, partial) in ``extra`` as the file has them."""

    schema_version: int
    suite: str
    created: str
    environment: dict[str, Any]  # {} when the file records none
    cases: tuple[CaseRecord, ...]
    suite_version: str | None = None  # None: the environment's suite_version says it
    finished: str | None = None
    summary: dict[str, int] | None = None
    notes: tuple[str, ...] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_payload(cls, payload: object, path: Path | str, suite: str | None = None) -> ResultsDoc:
        """A parsed results file, checked by :func:`check_results` (:class:`SchemaError` when it does not fit)."""
        data = check_results(payload, path, suite)
        notes = data.get("notes")
        return cls(schema_version=data["schema_version"], suite=data["suite"], created=data["created"],
                   environment=data.get("environment") or {},
                   cases=tuple(CaseRecord.from_dict(c, _checked=True) for c in data["cases"]),  # checked above
                   suite_version=data.get("suite_version"), finished=data.get("finished"),
                   summary=data.get("summary"), notes=tuple(notes) if notes is not None else None,
                   extra={k: v for k, v in data.items() if k not in _HEADER})


def printable(value: Any) -> Any:
    """``value`` with every character a results file's text may not hold (``_BAD_IN_TEXT``: control characters but
    tab, newline and carriage return; lone surrogates) written as its escape, ``\\x1b``, in every string of it."""
    if isinstance(value, str):
        return _BAD_IN_TEXT.sub(lambda m: repr(m.group())[1:-1], value)
    if isinstance(value, Mapping):
        return {k: printable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(printable(v) for v in value)
    return value


def utc(text: str) -> datetime:
    """An ISO 8601 time (``created``, ``finished``) as an aware UTC time; one without an offset is UTC, as the run
    id takes it. ValueError or OverflowError for a time that has none (:func:`check_results` refuses those)."""
    stamp = datetime.fromisoformat(text)
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).astimezone(UTC)


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json keeps the last of two equal keys: "status": "fail", ..., "status": "pass" would read as a pass.
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def read_json(path: Path) -> tuple[object, bytes]:
    """The JSON value of the regular file ``path`` and its bytes, or :class:`SchemaError` in one line naming the
    file: not a regular file (a FIFO would block the reader; a directory or a dangling link is not a file), not
    readable, not JSON, a key twice in one object, an integer past Python's digit limit, nesting past the parser's."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as err:
        raise SchemaError(f"{path}: cannot read it ({err.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SchemaError(f"{path}: not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read()
    except OSError as err:
        raise SchemaError(f"{path}: cannot read it ({err.strerror})") from None
    finally:
        os.close(fd)
    try:
        return json.loads(data, object_pairs_hook=_no_duplicates), data
    except _DuplicateKey as err:
        raise SchemaError(f"{path}: the key {show_value(err.key)} appears twice in one object") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        raise SchemaError(f"{path}: not valid JSON ({err})") from None
    except ValueError as err:  # e.g. an integer literal past Python's digit limit
        raise SchemaError(f"{path}: not usable JSON ({err})") from None


def check_strings(payload: object, path: Path | str) -> None:
    """Every string and key in ``payload`` (another JSON file that travels with the results, such as errata.json)
    text by the contract's rule, nesting bounded; else :class:`SchemaError` naming the file, the field, the value."""
    _Checker(path).deep_text("", payload)


def load_results(path: Path, suite: str | None = None) -> tuple[ResultsDoc, bytes]:
    """Read and check one results file: (it, typed; its bytes); :class:`SchemaError` when it does not fit."""
    payload, data = read_json(path)
    return ResultsDoc.from_payload(payload, path, suite), data
