"""The input model: a frozen problem spec that builds one SSD forward's inputs, reproducibly."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import torch

from reference.checks import SSDDims

__all__ = ["DTYPES", "REGIMES", "ProblemSpec", "SSDInputs"]

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp64": torch.float64}
# Input regimes by name: filled by reference/regimes.py as it is imported (reference/__init__ imports it), so
# that this module, which regimes build on, imports nothing of theirs.
REGIMES: dict = {}


@dataclass(frozen=True)
class SSDInputs:
    """The tensors of the common signature ``f(x, dt, A, B, C, D, initial_state)``."""

    x: torch.Tensor
    dt: torch.Tensor
    A: torch.Tensor
    B: torch.Tensor
    C: torch.Tensor
    D: torch.Tensor | None
    initial_state: torch.Tensor | None

    def as_args(self) -> tuple[torch.Tensor | None, ...]:
        return (self.x, self.dt, self.A, self.B, self.C, self.D, self.initial_state)

    def to(self, device: torch.device | str) -> SSDInputs:
        """A copy on ``device`` (strides of non-contiguous views are not kept; use the regime there)."""
        moved = {f.name: (None if getattr(self, f.name) is None else getattr(self, f.name).to(device))
                 for f in fields(self)}
        return SSDInputs(**moved)


@dataclass(frozen=True)
class ProblemSpec(SSDDims):
    """One SSD forward problem: its six sizes (the fields of ``SSDDims``, which it extends, in their order),
    chunk size, dtype, input regime and seed.

    ``dtype`` names the dtype of x, B and C (``bf16``, ``fp16``, ``fp32``, ``fp64``); dt, A, D and
    initial_state are fp32 (fp64 when dtype is fp64). ``regime`` names a function in
    ``reference.regimes.REGIMES``. The same spec, seed and device always build the same tensors.
    """

    chunk_size: int
    dtype: str = "bf16"
    regime: str = "typical"
    seed: int = 0
    with_D: bool = True
    with_initial_state: bool = False

    def __post_init__(self) -> None:
        for name in self.shape_dict():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ProblemSpec.{name} must be an int >= 1; got {value!r}")
        if self.nheads % self.ngroups:
            raise ValueError(f"ProblemSpec.ngroups={self.ngroups} must divide nheads={self.nheads}")
        if self.dtype not in DTYPES:
            raise ValueError(f"ProblemSpec.dtype must be one of {sorted(DTYPES)}; got {self.dtype!r}")
        if self.regime not in REGIMES:
            raise ValueError(f"ProblemSpec.regime must be one of {sorted(REGIMES)}; got {self.regime!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"ProblemSpec.seed must be an int >= 0 (torch.manual_seed's); got {self.seed!r}")
        for name in ("with_D", "with_initial_state"):
            if not isinstance(getattr(self, name), bool):  # 'no' would read as true
                raise ValueError(f"ProblemSpec.{name} must be True or False; got {getattr(self, name)!r}")

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    @property
    def param_dtype(self) -> torch.dtype:
        """dtype of dt, A, D and initial_state."""
        return torch.float64 if self.dtype == "fp64" else torch.float32

    @property
    def numel_x(self) -> int:
        return self.batch * self.seqlen * self.nheads * self.headdim

    def shape_dict(self) -> dict[str, int]:
        """The six sizes and the chunk size, by name."""
        return {**self._asdict(), "chunk_size": self.chunk_size}

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def case_id(self, impl: str, tag: str | None = None) -> str:
        """``{impl}-{dtype}-b{B}-l{L}-h{H}-p{P}-n{N}-c{chunk}-{regime}-s{seed}`` plus an intent tag."""
        parts = [impl, self.dtype, f"b{self.batch}", f"l{self.seqlen}", f"h{self.nheads}", f"p{self.headdim}",
                 f"n{self.dstate}", f"c{self.chunk_size}"]
        if self.ngroups != 1:
            parts.append(f"g{self.ngroups}")
        parts += [self.regime, f"s{self.seed}"]
        if not self.with_D:
            parts.append("noD")
        if self.with_initial_state:
            parts.append("h0")
        if tag:
            parts.append(tag)
        return "-".join(parts)

    def make_inputs(self, device: torch.device | str = "cpu") -> SSDInputs:
        """Build the inputs on ``device`` with a generator seeded from ``seed`` (never the global RNG)."""
        device = torch.device(device)
        gen = torch.Generator(device=device)
        gen.manual_seed(self.seed)
        return REGIMES[self.regime](self, gen, device)
