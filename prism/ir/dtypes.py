"""The element types a program runs in: one frozen entry each, holding everything that differs
between them. Every other module asks this table (`get_dtype`) instead of knowing a dtype.

    get_dtype("bf16").bytes          # 2
    get_dtype(torch.float32).triton  # "*fp32"

The IR's semantics are real numbers (the float64 interpreter is the oracle); a dtype is how a
program's tensors are stored and loaded. Whatever the dtype, generated kernels compute in fp32
(fp32 accumulators, fp32 partial tiles) and store in the dtype. A dtype sets:

- `bytes`: an element's size, which the cost model, the roofline and the search's hardware rule
  count (through `DeviceSpec.dtype_bytes`);
- `triton`: the pointer type of a tensor argument in an offline PTX signature;
- `tolerance`: the check's max |got − want| / max |want| against the float64 reference on the same
  dtype-rounded inputs. fp16's 2e-2 is about 41 of its unit roundoffs (u = 2^-11) and has held
  for every workload since the first check. In fp16 and bf16 the error is the dtype's roundings
  of outputs and intermediates (the kernel computes in fp32): about 1 u each on the library's
  known-best kernels, so bf16 gets 5e-2 (about 13 of its u = 2^-8), still far below the O(1)
  error of a wrong lane or a wrong op. In fp32 the arithmetic itself rounds, and a reduction of
  K terms gathers up to about K·u (the known-best kernels measure up to 16 u = 9.5e-7 at small
  shapes), so fp32 gets 1e-4: room for rows of thousands, four orders below a real bug;
- `tensor_cores`: whether its matmuls run at the tensor-core peak (`DeviceSpec.fp16_tflops`, the
  same for bf16) or, for fp32, the IEEE fp32 peak of the CUDA cores (`DeviceSpec.fp32_tflops`):
  kernels generated for fp32 ask `tl.dot` for IEEE fp32 (`input_precision="ieee"`), not tf32.

No torch here (the IR stays light): `torch_dtype` names torch's attribute, `getattr(torch, name)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prism.errors import DtypeError


@dataclass(frozen=True)
class DType:
    """One element type Prism runs programs in (see the module docstring)."""

    name: str              # torch's name: torch.float16 is "float16"
    short: str             # how kernels, PTX and tolerances are spoken of: "fp16"
    bytes: int
    triton: str            # PTX signature pointer type
    unit_roundoff: float   # u = 2^-(significand bits): the relative error of one rounding
    tolerance: float       # the check's max |got − want| / max |want| (module docstring)
    tensor_cores: bool     # matmul peak: the tensor-core one, else fp32's CUDA-core one

    @property
    def tolerance_text(self) -> str:
        """The tolerance as checks and reports say it: "fp16 tolerance 2e-2"."""
        mantissa, exponent = f"{self.tolerance:.1e}".split("e")
        return f"{self.short} tolerance {float(mantissa):g}e{int(exponent)}"

    def __str__(self) -> str:
        return self.name


FLOAT16 = DType("float16", "fp16", 2, "*fp16", 2.0 ** -11, 2e-2, tensor_cores=True)
BFLOAT16 = DType("bfloat16", "bf16", 2, "*bf16", 2.0 ** -8, 5e-2, tensor_cores=True)
FLOAT32 = DType("float32", "fp32", 4, "*fp32", 2.0 ** -24, 1e-4, tensor_cores=False)

DTYPES: dict[str, DType] = {d.name: d for d in (FLOAT16, BFLOAT16, FLOAT32)}
DEFAULT_DTYPE = FLOAT16    # what a program runs in unless it says otherwise

# the spellings model code uses for them (torch's names and aliases, and the short names)
_ALIASES = {"float16": FLOAT16, "fp16": FLOAT16, "half": FLOAT16,
            "bfloat16": BFLOAT16, "bf16": BFLOAT16,
            "float32": FLOAT32, "fp32": FLOAT32, "float": FLOAT32}


def get_dtype(dtype: Any) -> DType:
    """The entry for `dtype`: a `DType`, a torch dtype (`torch.bfloat16`) or a name (`"bf16"`,
    `"half"`, `"torch.float32"`, any case); anything else (float64, integers) is a
    `DtypeError` that names the dtypes Prism runs."""
    if isinstance(dtype, DType):
        return dtype
    text = str(dtype).strip().lower()
    found = _ALIASES.get(text.removeprefix("torch."))
    if found is None:
        raise DtypeError(f"dtype {dtype!r} is not supported: Prism runs float16, bfloat16 and "
                         "float32 programs (also spelled fp16/half, bf16, fp32/float); convert "
                         "the tensors (e.g. module.half()) or pass dtype='float32'")
    return found
