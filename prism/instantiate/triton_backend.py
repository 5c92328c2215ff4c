"""Triton itself: importing a generated module (interpreted or compiled) and compiling it to PTX
offline. The only module of `prism` that imports triton, lazily.

- `load(program)` writes the source to a file (Triton reads a kernel's source with `inspect`, so a
  module needs one) and imports it; without a GPU (or with `TRITON_INTERPRET=1`) its kernels run
  in Triton's interpreter on CPU tensors.
- `compile_ptx(program)` compiles every kernel (custom and combine) for `GPUTarget("cuda", 90,
  32)` (Hopper) without a GPU, in a subprocess, and returns each kernel's PTX.
- `bench_cuda(fn)` times `fn` on a GPU in the cost model's cache regime (L2 flushed before each
  call).
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
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from prism.errors import PrismError
from prism.instantiate.codegen import TritonProgram

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
                timeout_s: float = 300.0) -> list[Compiled]:
    """Every kernel of `program` compiled offline for `target` (no GPU needed), in a subprocess
    that imports Triton in compiling mode; a `CompileError` names the kernel that failed."""
    (result,) = compile_many([program], target, timeout_s)
    if isinstance(result, CompileError):
        raise result
    return result


def compile_many(programs: Sequence[TritonProgram], target: tuple[str, int, int] = HOPPER,
                 timeout_s: float = 600.0,
                 on_done: Callable[[int, list[Compiled] | CompileError], None] | None = None,
                 ) -> list[list[Compiled] | CompileError]:
    """Compile several programs in one subprocess (it pays Triton's and torch's import once),
    reporting each as it finishes through `on_done(index, result)`; a program that fails gives
    its `CompileError` in its place, and the others go on."""
    results: list[list[Compiled] | CompileError] = [
        CompileError("not compiled: the compiler stopped first") for _ in programs]
    request = {"target": list(target), "programs": [
        {"path": str(write_module(p)), "kernels": [[k.name, dict(k.signature)]
                                                   for k in p.triton_kernels],
         "options": {"num_warps": p.num_warps,
                     **({"num_stages": p.num_stages} if p.num_stages is not None else {})}}
        for p in programs]}
    _setup_env()
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    with tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen([sys.executable, "-m", "prism.instantiate.triton_backend"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
                                text=True, env=env)
        timer = threading.Timer(timeout_s, proc.kill)
        timer.start()
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(request))
            proc.stdin.close()
            for line in proc.stdout:
                reply = json.loads(line)
                i = reply["index"]
                results[i] = (CompileError(reply["error"]) if "error" in reply else
                              [Compiled(k["kernel"], k["ptx"], k["shared"])
                               for k in reply["kernels"]])
                if on_done is not None:
                    on_done(i, results[i])
            code = proc.wait()
        finally:
            timer.cancel()
        if code != 0:
            errors.seek(0)
            tail = (errors.read().strip().splitlines() or ["no message"])[-1]
            why = f"the compiler process ended with code {code}: {tail}" if code > 0 else \
                f"the compiler took over {timeout_s:.0f} s"
            for i, r in enumerate(results):
                if isinstance(r, CompileError) and str(r).startswith("not compiled"):
                    results[i] = CompileError(f"{programs[i].name or 'program'}: {why}")
                    if on_done is not None:
                        on_done(i, results[i])
    return results


def _compile_request(request: dict[str, Any]) -> None:
    """The subprocess: one JSON line per program, as each finishes."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    target = GPUTarget(*request["target"])
    for index, item in enumerate(request["programs"]):
        reply: dict[str, Any] = {"index": index, "kernels": []}
        try:
            module = load(Path(item["path"]).read_text(), Path(item["path"]))
        except Exception as e:
            reply = {"index": index, "error": f"{Path(item['path']).name} did not import: "
                                              f"{type(e).__name__}: {e}"}
        for name, signature in item["kernels"] if "error" not in reply else []:
            try:
                compiled: Any = triton.compile(ASTSource(getattr(module, name), signature, {}),
                                               target=target,
                                               options=item["options"])
            except Exception as e:  # Triton raises its own and MLIR errors; name the kernel
                text = str(e).strip()
                first = text.splitlines()[0] if text else type(e).__name__
                reply = {"index": index, "error": f"kernel {name} did not compile for "
                                                  f"{tuple(request['target'])}: {first}"}
                break
            reply["kernels"].append({"kernel": name, "ptx": compiled.asm["ptx"],
                                     "shared": int(getattr(compiled.metadata, "shared", 0))})
        print(json.dumps(reply), flush=True)


def bench_cuda(fn: Any, warmup_ms: int = 25, rep_ms: int = 100) -> float:
    """The median time of `fn()` on the GPU in µs, in the regime the cost model predicts
    (`prism.cost.model.CACHE_REGIME`): `triton.testing.do_bench` zeroes a 256 MB buffer before
    each timed call, so every call starts with a cold L2, and times the call with CUDA events."""
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
    _compile_request(json.loads(sys.stdin.read()))
