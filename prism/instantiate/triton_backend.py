"""Triton itself: importing a generated module (interpreted or compiled) and compiling it to PTX
offline. The only module of `prism` that imports triton, lazily.

- `load(program)` writes the source to a file (Triton reads a kernel's source with `inspect`, so a
  module needs one) and imports it; without a GPU (or with `TRITON_INTERPRET=1`) its kernels run
  in Triton's interpreter on CPU tensors.
- `compile_ptx(program)` compiles every kernel for `GPUTarget("cuda", 90, 32)` (Hopper) without a
  GPU, in a subprocess, and returns each kernel's PTX.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from prism.errors import PrismError
from prism.instantiate.codegen import NUM_WARPS, TritonProgram

HOPPER = ("cuda", 90, 32)


class CompileError(PrismError):
    """A generated kernel Triton would not compile (names the kernel and Triton's message)."""


def _setup_env() -> None:
    # Triton's cache defaults to the home directory; keep it with the project's temporary files.
    os.environ.setdefault("TRITON_CACHE_DIR", str(Path(tempfile.gettempdir()) / "prism-triton"))
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")


def interpreting() -> bool:
    """Whether this process runs Triton kernels in the interpreter.

    Triton decides when it is first imported (its own library is `@triton.jit` code), so this is
    decided once: `TRITON_INTERPRET` if the environment sets it, else the interpreter exactly when
    torch sees no GPU. Offline compilation runs in a subprocess, whatever this process does."""
    _setup_env()
    if "TRITON_INTERPRET" not in os.environ and "triton" not in sys.modules:
        import torch
        os.environ["TRITON_INTERPRET"] = "0" if torch.cuda.is_available() else "1"
    from triton import knobs
    return bool(knobs.runtime.interpret)


def module_dir() -> Path:
    path = Path(os.environ.get("PRISM_KERNEL_DIR", Path(tempfile.gettempdir()) / "prism-kernels"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_module(program: TritonProgram | str, path: Path | None = None) -> Path:
    """The source on disk (Triton reads kernels' source with `inspect`): `path`, or a file named by
    the source's hash under `module_dir()`."""
    source = program if isinstance(program, str) else program.source
    if path is None:
        digest = hashlib.sha256(source.encode()).hexdigest()[:16]
        path = module_dir() / f"prism_kernel_{digest}.py"
    if not path.exists() or path.read_text() != source:
        path.write_text(source)
    return path


def load(program: TritonProgram | str, path: Path | None = None) -> ModuleType:
    """Import a generated module; its kernels run in the interpreter when `interpreting()`."""
    interpreting()
    path = write_module(program, path)
    name = f"prism_kernel_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module


@dataclass(frozen=True)
class Compiled:
    kernel: str
    ptx: str
    shared_bytes: int


def compile_ptx(program: TritonProgram, target: tuple[str, int, int] = HOPPER,
                num_warps: int = NUM_WARPS, timeout_s: float = 300.0) -> list[Compiled]:
    """Every kernel of `program` compiled offline for `target` (no GPU needed), in a subprocess
    that imports Triton in compiling mode."""
    path = write_module(program)
    request = {"path": str(path), "target": list(target), "num_warps": num_warps,
               "kernels": [[k.name, dict(k.signature)] for k in program.kernels]}
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    _setup_env()
    try:
        done = subprocess.run([sys.executable, "-m", "prism.instantiate.triton_backend"],
                              input=json.dumps(request), capture_output=True, text=True,
                              env=env, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise CompileError(f"compiling {program.name or path.name} took over {timeout_s:.0f} s"
                           ) from None
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise CompileError(f"compiling {program.name or path.name} for {target} failed: {tail}")
    reply = json.loads(done.stdout)
    if "error" in reply:
        raise CompileError(reply["error"])
    return [Compiled(k["kernel"], k["ptx"], k["shared"]) for k in reply["kernels"]]


def _compile_request(request: dict[str, Any]) -> dict[str, Any]:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    module = load(Path(request["path"]).read_text(), Path(request["path"]))
    target = GPUTarget(*request["target"])
    out = []
    for name, signature in request["kernels"]:
        try:
            compiled: Any = triton.compile(ASTSource(getattr(module, name), signature, {}),
                                           target=target,
                                           options={"num_warps": request["num_warps"]})
        except Exception as e:  # Triton raises its own and MLIR errors; name the kernel
            text = str(e).strip()
            first = text.splitlines()[0] if text else type(e).__name__
            return {"error": f"kernel {name} did not compile for {tuple(request['target'])}: "
                             f"{first}"}
        out.append({"kernel": name, "ptx": compiled.asm["ptx"],
                    "shared": int(getattr(compiled.metadata, "shared", 0))})
    return {"kernels": out}


def bench_cuda(fn: Any, warmup_ms: int = 25, rep_ms: int = 100) -> float:
    """The median time of `fn()` on the GPU in µs (CUDA events, `triton.testing.do_bench`)."""
    from triton.testing import do_bench
    return float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")) * 1e3


def versions() -> dict[str, str]:
    """What a timing depends on besides the kernel: the Triton and torch versions and the GPU."""
    interpreting()
    import torch
    import triton
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
    return {"triton": triton.__version__, "torch": torch.__version__, "gpu": gpu}


def strip_locations(text: str) -> str:
    """PTX or IR without what names the source file: `#loc`/`.loc`/`.file` lines, `loc(...)`
    attributes and the `.debug_*` sections (which spell the path as bytes)."""
    kept, skipping = [], False
    for line in text.splitlines():
        bare = line.strip()
        if bare.startswith(".section") and ".debug" in bare:
            skipping = True
            continue
        if skipping:
            skipping = bare != "}"
            continue
        if bare.startswith(("#loc", ".loc", ".file")):
            continue
        kept.append(line)
    return re.sub(r"\s*loc\([^()]*(\([^()]*\))?[^()]*\)", "", "\n".join(kept))

if __name__ == "__main__":
    # The compiling subprocess of `compile_ptx`: a JSON request on stdin, a JSON reply on stdout.
    print(json.dumps(_compile_request(json.loads(sys.stdin.read()))))
