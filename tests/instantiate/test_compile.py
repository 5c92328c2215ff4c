"""Offline compilation to PTX for Hopper (sm_90), no GPU needed: every hand-fused kernel at its
workload's default shapes, a split-K kernel and its combine kernel, and the determinism of the
location-stripped PTX.

Each compile runs in a subprocess (3-6 s with Triton's cache warm, most of it importing torch; up
to 10 s cold), so each program is compiled once per module and shared. The determinism test
compiles again into an empty cache, so that its second PTX is compiled, not read back.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from prism.frontend.builder import Block, Graph
from prism.instantiate.codegen import TritonProgram, generate
from prism.instantiate.triton_backend import Compiled, compile_ptx, strip_locations
from prism.workloads import get_workload
from prism.workloads.known_best import KNOWN_BEST, known_best

LOCATION_LINE = re.compile(r"^\s*(\.loc|#loc|\.file)\b", re.MULTILINE)

Compiler = Callable[[str], tuple[TritonProgram, list[Compiled]]]


@pytest.fixture(scope="module")
def compiled() -> Compiler:
    """The known_best program of a workload at its default shapes and its PTX, compiled once."""
    done: dict[str, tuple[TritonProgram, list[Compiled]]] = {}

    def get(name: str) -> tuple[TritonProgram, list[Compiled]]:
        if name not in done:
            program = generate(known_best(name, get_workload(name).shapes))
            done[name] = (program, compile_ptx(program))
        return done[name]
    return get


@pytest.mark.parametrize("name", list(KNOWN_BEST))
def test_known_best_compiles_for_sm90(compiled: Compiler, name: str) -> None:
    program, kernels = compiled(name)
    assert [k.kernel for k in kernels] == [k.name for k in program.triton_kernels]
    assert len(kernels) == 1
    for k in kernels:
        assert re.search(r"^\.target\s+sm_90a?\b", k.ptx, re.MULTILINE), "not compiled for sm_90"
        assert re.search(rf"\.entry\s+{re.escape(k.kernel)}\s*\(", k.ptx), "no kernel entry"
        assert isinstance(k.shared_bytes, int) and 0 <= k.shared_bytes <= 228 * 1024


def test_a_combine_kernel_compiles_for_sm90() -> None:
    """X @ W with K split over 8 blocks: the kernel and the combine that adds its partial tiles
    (fp32 in, fp16 out)."""
    g = Graph("split_k")
    X, W = g.input("X", (8, 1024)), g.input("W", (1024, 1024))
    tb = Block(grid=(8, 16), forloop_range=2)
    x, w = tb.input(X, imap=(1, -1), fmap=1), tb.input(W, imap=(0, 1), fmap=0)
    tb.output(tb.accum(tb.matmul(x, w)), omap=(-1, 1))
    (out,) = g.customized(tb)
    g.output(out)
    program = generate(g.build())
    assert len(program.combines) == 1
    kernels = compile_ptx(program)
    assert [k.kernel for k in kernels] == [k.name for k in program.triton_kernels]
    for k in kernels:
        assert re.search(rf"\.entry\s+{re.escape(k.kernel)}\s*\(", k.ptx), "no kernel entry"


def test_strip_locations_removes_every_location_line(compiled: Compiler) -> None:
    _, (k,) = compiled("rmsnorm_matmul")
    assert LOCATION_LINE.search(k.ptx), "the PTX carries .loc/.file lines to strip"
    stripped = strip_locations(k.ptx)
    assert not LOCATION_LINE.search(stripped)
    lines = k.ptx.splitlines()
    debug = next(i for i, ln in enumerate(lines) if ln.strip().startswith(".section")
                 and ".debug" in ln)
    kept = [ln for ln in lines[:debug] if not LOCATION_LINE.match(ln)]
    assert stripped.splitlines() == kept, \
        "strip_locations dropped more than locations and the trailing .debug sections"
    ir = 'module {\n  tt.func @f() {\n    tt.return loc(#loc3)\n  } loc(#loc1)\n} loc(#loc)\n' \
         '#loc = loc("/abs/path/k.py":1:0)\n#loc1 = loc(unknown)\n#loc3 = loc(callsite(#loc1 at ' \
         '#loc))\n'
    assert strip_locations(ir) == "module {\n  tt.func @f() {\n    tt.return\n  }\n}"


def _debug_bytes(ptx: str) -> bytes:
    """The bytes that `.b8` directives spell (the DWARF sections' strings)."""
    return bytes(int(v) for v in re.findall(r"^\.b8\s+(\d+)", ptx, re.MULTILINE))


def test_stripped_ptx_carries_no_path(compiled: Compiler) -> None:
    _, (k,) = compiled("lora")
    assert "prism_kernel_" in k.ptx        # the module file, prism_kernel_<hash>.py
    stripped = strip_locations(k.ptx)
    assert "prism_kernel_" not in stripped
    assert b"prism_kernel_" not in _debug_bytes(stripped)


def test_two_compiles_give_the_same_stripped_ptx(compiled: Compiler, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    program, first = compiled("ntrans")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))     # compiled again, not read back
    again = compile_ptx(program)
    assert [strip_locations(k.ptx) for k in again] == [strip_locations(k.ptx) for k in first]
    assert [k.shared_bytes for k in again] == [k.shared_bytes for k in first]
