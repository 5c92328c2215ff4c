"""What Triton's interpreter computes for a bf16 `tl.dot`: one 16×16×16 tile, as bf16, as
fp16 and as fp32 holding the same bf16-rounded values, each against torch in float64 on those
values. Run on a CPU:

    TRITON_INTERPRET=1 python bench/bf16_interpreter.py

It is why Prism checks a bf16 kernel under the interpreter on fp32 tensors holding bf16 values
(`prism.tune.backends`), and refuses bf16 tensors there (the generated launcher).
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

# TRITON_INTERPRET is read when triton is imported, so it is set above
import torch
import triton
import triton.language as tl


@triton.jit
def dot16(a_ptr, b_ptr, c_ptr):
    i = tl.arange(0, 16)
    a = tl.load(a_ptr + i[:, None] * 16 + i[None, :])
    b = tl.load(b_ptr + i[:, None] * 16 + i[None, :])
    tl.store(c_ptr + i[:, None] * 16 + i[None, :], tl.dot(a, b).to(c_ptr.dtype.element_ty))


torch.manual_seed(0)
a64 = torch.randn(16, 16, dtype=torch.float64).to(torch.bfloat16).double()  # bf16-exact values
b64 = torch.randn(16, 16, dtype=torch.float64).to(torch.bfloat16).double()
want = a64 @ b64
print(f"triton {triton.__version__}, torch {torch.__version__}, "
      f"interpreter: {os.environ['TRITON_INTERPRET'] == '1'}")
for dtype in (torch.bfloat16, torch.float16, torch.float32):
    a, b = a64.to(dtype), b64.to(dtype)
    c = torch.empty(16, 16, dtype=dtype)
    dot16[(1,)](a, b, c)
    err = ((c.double() - want).abs().max() / want.abs().max()).item()
    print(f"{dtype!s:<15} max |c - torch float64| / max |torch float64| = {err:.2e}  "
          f"c[0, :3] = {[round(x, 3) for x in c[0, :3].double().tolist()]}  "
          f"want {[round(x, 3) for x in want[0, :3].tolist()]}")
