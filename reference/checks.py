"""The one input check every SSD forward entry point runs before touching a kernel.

It raises ``TypeError`` (wrong type or dtype) or ``ValueError`` (wrong shape, device, size or layout),
and every message names the argument, what was expected and what came, for example::

    ValueError: ssd_fwd_cutile: B has shape (2, 64, 3, 16); expected (batch, seqlen, ngroups, dstate)
    with batch=2, seqlen=64 and ngroups dividing nheads=8 (got ngroups=3)

Of the values, only dt's and A's are inspected (``check_domain``; docs/design.md, "Input contract"): a kernel
takes Mamba's parameterisation, A <= 0 and dt >= 0, both finite, and refuses the rest with a ``DomainError``
(a ``ValueError``) that counts the entries out of range and names the first; the float64 references take any
real A and dt. x, B, C, D and the initial state are not inspected (the NaN regime puts NaN in x on purpose).
Inside ``domain_checked(dt, A)`` the check is skipped for those very tensors, unmodified: the benchmark
times repeated calls on one input so, and times the check on its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields

import torch
from torch import Tensor

__all__ = ["CHUNK_SIZE", "REFERENCE_LIMITS", "DomainError", "Limits", "Requirement", "SSDDims", "check_domain",
           "check_inputs", "check_requirements", "domain_checked", "first_unmet", "FLOAT_DTYPES", "dtype_name",
           "is_power_of_two"]

# The one signature's default chunk: the post's, and what our kernels and TileGym are tuned for.
CHUNK_SIZE = 128

# The dtypes x, B and C may have in a GPU kernel. The references also take float64.
FLOAT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)

_NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32", torch.float64: "fp64"}


def dtype_name(dtype: torch.dtype) -> str:
    """Short dtype name used in case ids and results files (``bf16``, ``fp16``, ``fp32``, ``fp64``)."""
    return _NAMES.get(dtype, str(dtype).removeprefix("torch."))


def is_power_of_two(n: object) -> bool:
    """Whether ``n`` is an int (not a bool) 1, 2, 4, ...: a tile's dimension, which cuTile needs a power of two."""
    return isinstance(n, int) and not isinstance(n, bool) and n >= 1 and n & (n - 1) == 0


# Where each size of the common signature comes from, for messages that name the argument.
SIZE_ARGUMENTS = {"batch": "x.shape[0]", "seqlen": "x.shape[1]", "nheads": "x.shape[2]", "headdim": "x.shape[3]",
                  "ngroups": "B.shape[2]", "dstate": "B.shape[3]", "chunk_size": "chunk_size"}


@dataclass(frozen=True)
class Requirement:
    """A condition on sizes that a set of values cannot state (a divisibility, a power of two, a product), which an
    implementation's code needs: declared in its ``Limits.requirements`` with where its code needs it.

    ``sizes`` names the sizes ``holds`` takes, in order: fields of ``SSDDims`` or ``chunk_size``.
    """

    sizes: tuple[str, ...]
    holds: Callable[..., bool]
    expected: str    # what it needs, said in full: "nheads a multiple of 4"
    source: str      # why: where the implementation's code needs it

    def unmet(self, values: Mapping[str, int]) -> str | None:
        """The sizes as they came, ``"nheads=6 (x.shape[2])"``, if they miss this requirement; None if they meet it."""
        if self.holds(*(values[name] for name in self.sizes)):
            return None
        return ", ".join(f"{name}={values[name]} ({SIZE_ARGUMENTS[name]})" for name in self.sizes)


@dataclass(frozen=True)
class Limits:
    """What one implementation can take, declared once beside its forward (its ``LIMITS``).

    The forward refuses what lies outside; ``validation.registry`` reads the same object to record such a
    case ``unsupported`` with the limit that rules it out.
    """

    needs_cuda: bool
    dtypes: tuple[str, ...]                      # of x, B and C (dtype_name's names)
    chunk_sizes: tuple[int, ...] | None = None   # None: any chunk_size >= 1
    ragged: bool = True                          # seqlen need not be a multiple of chunk_size
    headdims: tuple[int, ...] | None = None      # None: any
    dstates: tuple[int, ...] | None = None       # None: any
    max_batch: int | None = None                 # None: any
    int64_indexing: bool = True                  # False: refuses tensors past 2**31 elements
    requirements: tuple[Requirement, ...] = ()   # what the sets above cannot say (``check_requirements``)


@dataclass(frozen=True)
class SSDDims:
    """The six sizes of one SSD forward: what ``check_inputs`` returns, and the first fields of
    ``reference.ProblemSpec``, which extends them. It keeps the NamedTuple API it had: it unpacks like a tuple
    (``batch, seqlen, *_ = dims``) and ``_asdict()`` gives the six sizes by name."""

    batch: int
    seqlen: int
    nheads: int
    headdim: int
    ngroups: int
    dstate: int

    def _asdict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(SSDDims)}

    def __iter__(self):
        return iter(self._asdict().values())


def _fail(who: str, message: str, kind: type[Exception] = ValueError) -> None:
    raise kind(f"{who}: {message}")


def _require_tensor(who: str, name: str, value: object) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        _fail(who, f"{name} must be a torch.Tensor; got {type(value).__name__}", TypeError)
    return value


def _require_dtype(who: str, name: str, t: torch.Tensor, allowed: Collection[torch.dtype]) -> None:
    if t.dtype not in allowed:
        want = ", ".join(dtype_name(d) for d in allowed)
        _fail(who, f"{name} has dtype {dtype_name(t.dtype)}; expected one of {want}", TypeError)


def _require_shape(who: str, name: str, t: torch.Tensor, shape: tuple[int, ...], meaning: str) -> None:
    if tuple(t.shape) != shape:
        _fail(who, f"{name} has shape {tuple(t.shape)}; expected {shape} = {meaning}")


def check_requirements(limits: Limits, dims: SSDDims, chunk_size: int, *, who: str) -> None:
    """Refuse, naming the argument, sizes that miss one of ``limits.requirements``: for checked inputs
    (``check_inputs``'s dimensions and chunk_size)."""
    unmet = first_unmet(limits, {**dims._asdict(), "chunk_size": chunk_size})
    if unmet is not None:
        requirement, got = unmet
        _fail(who, f"{got} is not supported; expected {requirement.expected} ({requirement.source})")


def first_unmet(limits: Limits, values: Mapping[str, int]) -> tuple[Requirement, str] | None:
    """The first of ``limits.requirements`` that the sizes ``values`` (``SSDDims``' fields and chunk_size) miss, with
    the sizes as they came (``Requirement.unmet``); None if they meet every one."""
    for requirement in limits.requirements:
        got = requirement.unmet(values)
        if got is not None:
            return requirement, got
    return None


def check_inputs(x: Tensor, dt: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None = None,
                 initial_state: Tensor | None = None, *, chunk_size: int, who: str, domain: str = "mamba",
                 x_dtypes=FLOAT_DTYPES, chunk_sizes=None, require_cuda=False, unit_stride_last_dim=False,
                 refuse_grad=False) -> SSDDims:
    """Check the common SSD forward signature and return its dimensions.

    Layout (mamba_ssm's): x (batch, seqlen, nheads, headdim); dt (batch, seqlen, nheads) fp32;
    A (nheads,) fp32; B, C (batch, seqlen, ngroups, dstate) in x's dtype; D (nheads,) fp32 or None;
    initial_state (batch, nheads, headdim, dstate) fp32 or None.

    Args:
        who: the entry point's name, which starts every message.
        domain: the values of A and dt it takes: ``"mamba"`` (A <= 0, dt >= 0, both finite; ``check_domain``),
            every kernel's, or ``"any"``, the float64 references'.
        x_dtypes: the dtypes (a collection of torch.dtype) this implementation takes for x, B and C.
        chunk_sizes: the chunk sizes (a collection of int) it supports; None: any integer >= 1.
        require_cuda: the implementation runs only on a CUDA device.
        unit_stride_last_dim: every tensor must have stride 1 in its last dimension (kernels that
            cannot take a general stride copy instead; this is for those that must refuse).
        refuse_grad: the implementation has no backward: refuse tensors that require grad (the caller passes
            ``.detach()``), rather than return outputs that silently carry no gradient.
    """
    if domain not in ("mamba", "any"):
        _fail(who, f"check_inputs' domain must be 'mamba' or 'any'; got {domain!r}")
    x = _require_tensor(who, "x", x)
    if x.dim() != 4:
        _fail(who, f"x must be 4-D (batch, seqlen, nheads, headdim); got {x.dim()}-D shape {tuple(x.shape)}")
    batch, seqlen, nheads, headdim = x.shape
    if min(batch, seqlen, nheads, headdim) < 1:
        _fail(who, f"x has shape {tuple(x.shape)}; every dimension must be >= 1")
    _require_dtype(who, "x", x, x_dtypes)
    # dt, A, D and initial_state are fp32; an implementation that takes fp64 x takes fp64 for these too.
    fp32_or_64 = (torch.float32, torch.float64) if torch.float64 in x_dtypes else (torch.float32,)

    dt = _require_tensor(who, "dt", dt)
    _require_shape(who, "dt", dt, (batch, seqlen, nheads), "(batch, seqlen, nheads) of x")
    _require_dtype(who, "dt", dt, fp32_or_64)

    A = _require_tensor(who, "A", A)
    _require_shape(who, "A", A, (nheads,), "(nheads,) of x")
    _require_dtype(who, "A", A, fp32_or_64)

    B = _require_tensor(who, "B", B)
    C = _require_tensor(who, "C", C)
    for name, t in (("B", B), ("C", C)):
        if t.dim() != 4:
            _fail(who, f"{name} must be 4-D (batch, seqlen, ngroups, dstate); "
                       f"got {t.dim()}-D shape {tuple(t.shape)}")
        if t.shape[0] != batch or t.shape[1] != seqlen:
            _fail(who, f"{name} has shape {tuple(t.shape)}; "
                       f"expected (batch={batch}, seqlen={seqlen}, ngroups, dstate) as in x")
    ngroups, dstate = B.shape[2], B.shape[3]
    if ngroups < 1 or dstate < 1:
        _fail(who, f"B has shape {tuple(B.shape)}; ngroups and dstate must be >= 1")
    if nheads % ngroups != 0:
        _fail(who, f"B has ngroups={ngroups}, which does not divide nheads={nheads}; expected a divisor of {nheads}")
    _require_shape(who, "C", C, tuple(B.shape), "the shape of B")
    for name, t in (("B", B), ("C", C)):
        if t.dtype != x.dtype:
            _fail(who, f"{name} has dtype {dtype_name(t.dtype)}; expected x's dtype {dtype_name(x.dtype)}", TypeError)

    if D is not None:
        D = _require_tensor(who, "D", D)
        _require_shape(who, "D", D, (nheads,), "(nheads,) of x, or None")
        _require_dtype(who, "D", D, fp32_or_64)
    if initial_state is not None:
        initial_state = _require_tensor(who, "initial_state", initial_state)
        _require_shape(who, "initial_state", initial_state, (batch, nheads, headdim, dstate),
                       "(batch, nheads, headdim, dstate), or None")
        _require_dtype(who, "initial_state", initial_state, fp32_or_64)

    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
        _fail(who, f"chunk_size must be an int; got {type(chunk_size).__name__} {chunk_size!r}", TypeError)
    if chunk_sizes is not None and chunk_size not in chunk_sizes:
        _fail(who, f"chunk_size={chunk_size} is not supported; expected one of {sorted(chunk_sizes)}")
    if chunk_size < 1:
        _fail(who, f"chunk_size must be >= 1; got {chunk_size}")

    named = {"x": x, "dt": dt, "A": A, "B": B, "C": C, "D": D, "initial_state": initial_state}
    present = {k: v for k, v in named.items() if v is not None}
    devices = {k: v.device for k, v in present.items()}
    if len(set(devices.values())) != 1:
        listing = ", ".join(f"{k} on {v}" for k, v in devices.items())
        _fail(who, f"all tensors must be on one device; got {listing}")
    if refuse_grad:
        for k, v in present.items():
            if v.requires_grad:
                _fail(who, f"{k} requires grad; expected a tensor that does not: this forward has no backward "
                           f"(autograd cannot differentiate through it), so pass {k}.detach()")
    if domain == "mamba" and not _vouched(dt, A):  # before require_cuda: the same refusal on any device
        check_domain(dt, A, who=who)
    if require_cuda and x.device.type != "cuda":
        _fail(who, f"x is on {x.device}; expected a CUDA device (this implementation runs only on a GPU)")
    if unit_stride_last_dim:
        for k, v in present.items():
            if v.dim() and v.stride(-1) != 1 and v.shape[-1] != 1:
                _fail(who, f"{k} has strides {v.stride()}; expected stride 1 in its last dimension")
    return SSDDims(batch, seqlen, nheads, headdim, ngroups, dstate)


# The float64 references take every float dtype, float64 too, on any device, at any shape, and any real A and dt:
# they are the ground truth, defined wherever the recurrence is. Every other entry point takes Mamba's domain.
REFERENCE_LIMITS = Limits(needs_cuda=False, dtypes=tuple(dtype_name(d) for d in (*FLOAT_DTYPES, torch.float64)))


class DomainError(ValueError):
    """A and dt outside an entry point's domain (``check_domain``). The matrix records it ``unsupported``, with
    this message as the reason: the entry point declares the case out of its reach."""


# For each of dt and A: the entries out of range, how they are said, the range, and where Mamba's values come from.
_DOMAIN = {
    "dt": (lambda t: t < 0, "< 0", "dt >= 0", "Mamba's dt = softplus(dt + dt_bias), clamped"),
    "A": (lambda t: t > 0, "> 0", "A <= 0", "Mamba's A = -exp(A_log)"),
}


def _refuse(who: str, name: str, t: Tensor) -> None:
    """Raise the DomainError for ``t`` (the failure path: it may synchronise as it likes)."""
    out_of_range, said, rule, origin = _DOMAIN[name]
    nonfinite = ~torch.isfinite(t)
    wrong = out_of_range(t) & ~nonfinite
    bad = (wrong | nonfinite).reshape(-1)
    flat = int(bad.to(torch.uint8).argmax())  # the first bad entry in row-major order
    index = []
    for size in reversed(t.shape):
        flat, i = divmod(flat, size)
        index.append(i)
    index = tuple(reversed(index))
    kinds = " or ".join(k for k, m in ((said, wrong), ("not finite", nonfinite)) if bool(m.any()))
    where = f"{name}[{', '.join(map(str, index))}] = {float(t[index]):.6g}"
    finite = "finite " if bool(nonfinite.any()) else ""
    raise DomainError(f"{who}: {name} has {int(bad.sum())} of {t.numel()} entries {kinds} (first: {where}); "
                      f"expected {finite}{rule} ({origin})")


MAX_DECAY_STEP = 1e30  # the largest |A|·dt check_domain takes (see there)


def check_domain(dt: Tensor, A: Tensor, *, who: str) -> None:
    """Refuse dt < 0, A > 0, NaN or Inf in dt or A, and |A|·dt past ``MAX_DECAY_STEP``: Mamba's parameterisation
    (A = -exp(A_log), dt a clamped softplus) is the kernels' domain, since they clamp every decay exponent to <= 0
    and outside it would compute something else. Raises ``DomainError``, e.g.::

        ssd_fwd_cutile: A has 2 of 8 entries > 0 (first: A[3] = 0.5); expected A <= 0 (Mamba's A = -exp(A_log))

    One host synchronisation, after three GPU activities: dt's range is reduced on its device (aminmax, through
    which a NaN propagates), joined to A (nheads values) in one tensor, and copied back once; the details are
    computed only to refuse. Meta tensors hold no values and pass.
    """
    if dt.device.type == "meta":
        return
    wide = torch.promote_types(dt.dtype, A.dtype)
    dt_lo, dt_hi, *a = torch.cat([v.to(wide).reshape(-1) for v in (*torch.aminmax(dt), A)]).tolist()
    if not (dt_lo >= 0 and dt_hi < math.inf):  # false for a NaN, which fails every comparison
        _refuse(who, "dt", dt)
    if not all(-math.inf < v <= 0 for v in a):
        _refuse(who, "A", A)
    # Finite A and dt whose product is not: the kernels take A·dt, and its running sum over a chunk, in fp32, where
    # past about 3.4e38 a product is Inf and the difference of two such sums NaN, while float64 stays finite.
    # MAX_DECAY_STEP leaves a chunk of 256 such tokens (times log2 e) far inside fp32; the stability suite's hugest
    # step is 1e7.
    step = -min(a, default=0.0) * dt_hi
    if step > MAX_DECAY_STEP:
        raise DomainError(f"{who}: |A|·dt reaches {step:.3g} (the largest |A|, {-min(a):.3g}, times the largest "
                          f"dt, {dt_hi:.3g}); expected at most {MAX_DECAY_STEP:.0e}: beyond it the chunk-local sums of "
                          "A·dt overflow fp32")


# Every (dt, A, dt's version, A's version) that the domain_checked blocks open here have checked.
_CHECKED: ContextVar[tuple[tuple, ...]] = ContextVar("ssd_domain_checked", default=())


def _vouched(dt: Tensor, A: Tensor) -> bool:
    return any(c[0] is dt and c[1] is A and (dt._version, A._version) == c[2:] for c in _CHECKED.get())


@contextmanager
def domain_checked(dt: Tensor, A: Tensor, *, who: str) -> Iterator[None]:
    """Check dt and A once (``check_domain``); inside the block, entry points skip the check for these very
    tensor objects while neither is modified in place (their version counters unchanged). Any other tensor,
    or these after an in-place change, is checked as always. Blocks nest: inside two, both pairs are vouched for.
    A write through ``.data`` (or by a kernel, or from another process) does not move a version counter, so
    inside the block it goes unseen: the block is for inputs its caller owns and does not change.

    For the benchmark, which calls every implementation many times on one input and times the kernels
    apart from this check (it times the check on its own, ``input_check_us``).
    """
    check_domain(dt, A, who=who)
    token = _CHECKED.set((*_CHECKED.get(), (dt, A, dt._version, A._version)))
    try:
        yield
    finally:
        _CHECKED.reset(token)
