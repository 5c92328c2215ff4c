import io
import json
import re as re_
import tokenize
import torch
from prism.instantiate.codegen import NUM_WARPS
x64, w64 = (t.double().cpu() for t in tensors)         # the fp16 inputs the kernels were given
want = (torch.nn.functional.rms_norm(x64, (x64.shape[-1],)) @ w64).numpy()


def err(a):
    return float(np.abs(a - want).max() / np.abs(want).max())


def tokens(source):   # Python's tokens; numbers, and digits in strings and comments, hidden
    hide = {tokenize.NUMBER: lambda s: "#", tokenize.STRING: lambda s: re_.sub(r"\d", "", s),
            tokenize.COMMENT: lambda s: re_.sub(r"\d", "", s)}
    return [(t.type, hide.get(t.type, str)(t.string))
            for t in tokenize.generate_tokens(io.StringIO(source).readline)]


ptx_text = compiled[0][0].ptx
rows, cols = SHAPES["X"][0], SHAPES["W"][1]


_exercise_rejects = [_rejects(check_repaired, broken_source)]
print("ORACLE " + json.dumps({
    "exercise_rejects": _exercise_rejects,
    "err_vs_torch": err(got), "nan": int(np.isnan(got).sum()),
    "members": [str(env) for env in assignments(sgraph)],
    "member_err_vs_torch": {k: err(v) for k, v in outputs.items()},
    "member_nan": {k: int(np.isnan(v).sum()) for k, v in outputs.items()},
    "unwritten": rows * (cols // kernel.grid[0]) * (kernel.grid[0] - launched[0]),
    "unwritten_columns": [cols // kernel.grid[0] * launched[0], cols - 1],
    "same_tokens": tokens(program.source) == tokens(other_program.source),
    "changed_lines": sum(a != b for a, b in zip(program.source.splitlines(),
                                                other_program.source.splitlines(), strict=True)),
    "kernel": kernel.name,
    "target": re_.search(r"^\.target\s+(\S+)", ptx_text, re_.M)[1],
    "entry": re_.search(r"\.entry\s+(\w+)\s*\(", ptx_text)[1],
    "threads": 32 * NUM_WARPS, "reqntid": int(re_.search(r"\.reqntid\s+(\d+)", ptx_text)[1]),
    "ptx_bytes": [len(c[0].ptx) for c in compiled],
    "mma": [sum(1 for ln in c[0].ptx.splitlines() if re_.match(r"\s*mma\.", ln))
            for c in compiled],
    "hopper": list(triton_backend.HOPPER) == list(TARGET)}))
