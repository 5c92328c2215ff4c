"""The Triton code generator against the float64 interpreter and torch, kernels run in Triton's
interpreter (CPU) on fp16 inputs with every allocation poisoned with NaN (see conftest.py).

- the lowering tables cover the op table;
- `Namer` makes distinct, valid, stable identifiers of any name, and no name a user gives reaches
  the generated source outside a string literal or a comment;
- the nine hand-fused kernels run correctly at small shapes, at two parameter choices each (tiles
  padded and masked, and tiles below 16, padded to tl.dot's 16);
- every block op and accumulator, summed grid dims, 2-D and 3-D grids, imap and fmap on one dim,
  rank-3 tiles, and pre-defined kernel ops in the launcher, one small graph each;
- snapshots of five generated modules: two fused kernels, a kernel with a tail, a combine
  kernel, the pre-defined ops in torch (`PRISM_UPDATE_SNAPSHOTS=1` rewrites them).

Each bug these tests found (names reaching comments and docstrings, an unparenthesised nested
offset, one tensor read by two block inputs, partial-sum buffers named outside the Namer, a tile
shadowing `range`) has its test here.
"""

from __future__ import annotations

import ast
import io
import keyword
import os
import re
import string
import tokenize
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from prism.errors import PrismError
from prism.frontend.builder import Block, Graph, Tensor
from prism.instantiate import triton_backend
from prism.instantiate.codegen import CodegenError, Namer, generate
from prism.ir.graph import BlockGraph, KernelGraph, Op
from prism.ir.interpret import interpret
from prism.ir.ops import BLOCK, COMPUTE_CATEGORIES, OPS
from prism.workloads import get_workload
from prism.workloads.known_best import KNOWN_BEST, known_best

# Padded lanes may hold 0/0, 1/0 or log2(0) in Triton's interpreter (numpy): harmless where they
# are masked or zeroed, and the NaN check on every output catches a lane that is not.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter")

SNAPSHOTS = Path(__file__).parent / "snapshots"
rng = np.random.default_rng(2027)


def randn(*shape: int, scale: float = 1.0) -> np.ndarray:
    return scale * rng.standard_normal(shape)


# -- the lowering tables ------------------------------------------------------------------------

def fields(template: str) -> tuple[set[int], set[str]]:
    """The positional and the named fields of a format template."""
    names = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    return {int(f) for f in names if f.isdigit()}, {f for f in names if not f.isdigit()}


def test_every_compute_op_has_a_torch_lowering_of_its_arity_and_attributes():
    compute = {n for n, od in OPS.items() if od.category in COMPUTE_CATEGORIES}
    assert compute, "no compute ops in the op table?"
    for name in compute:
        template = OPS[name].torch
        assert template, f"{name} has no torch lowering"
        positional, named = fields(template)
        assert positional == set(range(OPS[name].arity)), name
        assert named <= set(OPS[name].attrs) | set(OPS[name].optional), name


def test_every_block_op_and_accumulator_has_a_triton_lowering():
    block = {n for n, od in OPS.items()
             if BLOCK in od.levels and od.category in COMPUTE_CATEGORIES | {"accum"}}
    accums = {n for n, od in OPS.items() if od.category == "accum"}
    assert accums == {"nored", "red_ld_sum", "red_ld_mean", "red_ld_rms", "redtox_ld_sum",
                      "nored_rescale"}
    assert accums <= block
    for name in block:
        od = OPS[name]
        assert (od.triton is None) == od.structural, name
        if isinstance(od.triton, str):
            positional, named = fields(od.triton)
            assert positional == set(range(od.arity)), name
            assert {n.split("!")[0] for n in named} <= set(od.attrs), name


# -- names ----------------------------------------------------------------------------------------

AWKWARD = ["x", "a b", "a.b", "a_b", "a-b", "a__b", "ünïcödé", "名前", "名字", "1x", "9", "_9",
           "class", "def", "None", "True", "lambda", "match", "tl", "run", "i", "torch",
           "triton", "math", "pid0", "pid1", "dtype", "device", "_pow", "_alloc", "_f",
           "_prepare", "KERNELS", "", " ", "t", "tl_", "run_", "x_2", "x.2", "__import__('os')",
           'q"uote', "new\nline", "a\\b"]


def valid(ident: str) -> bool:
    return ident.isidentifier() and not keyword.iskeyword(ident)


def test_namer_gives_distinct_valid_identifiers():
    namer = Namer()
    idents = [namer(n) for n in AWKWARD]
    for name, ident in zip(AWKWARD, idents, strict=True):
        assert valid(ident), f"{name!r} → {ident!r}"
        assert ident.isascii(), f"{name!r} → {ident!r}"
    assert len(set(idents)) == len(AWKWARD), "two names share an identifier"
    for reserved in ("tl", "triton", "torch", "run", "i", "pid0", "dtype", "_alloc"):
        assert reserved not in idents, f"{reserved} is the generator's own name"


def test_namer_is_stable():
    a, b = Namer(), Namer()
    first = [a(n) for n in AWKWARD]
    assert [a(n) for n in AWKWARD] == first          # the same name, the same identifier
    assert [a(n) for n in reversed(AWKWARD)] == first[::-1]
    second = [b(n) for n in reversed(AWKWARD)]
    assert len(set(second)) == len(AWKWARD) and all(valid(s) for s in second)


def test_namer_clashes_get_suffixes_and_respect_taken_names():
    namer = Namer(taken={"X"})
    assert namer("a.b") != namer("a_b")
    assert namer("X") != "X" and valid(namer("X"))
    fresh = namer.fresh("a_b")
    assert fresh not in (namer("a.b"), namer("a_b")) and valid(fresh)
    later = namer("a_b_3")           # a later graph name may not take a fresh identifier
    assert later not in (fresh, namer("a.b"), namer("a_b"))


def test_builder_refuses_empty_and_non_string_names_with_a_prism_error():
    g = Graph()
    with pytest.raises(PrismError, match="non-empty string"):
        g.input("", (2, 2))
    with pytest.raises(PrismError, match="non-empty string"):
        g.input(3, (2, 2))  # type: ignore[arg-type]
    X = g.input("X", (2, 2))
    with pytest.raises(PrismError, match="used twice"):
        g.exp(X, name="X")


def rename(graph: KernelGraph, names: dict[str, str]) -> KernelGraph:
    """`graph` with tensors renamed (kernel and block level alike): reaches names the builder
    chooses itself, such as a custom kernel's outputs."""
    def r(t: str) -> str:
        return names.get(t, t)

    def ops(items: Sequence[Op]) -> tuple[Op, ...]:
        return tuple(replace(op, inputs=tuple(map(r, op.inputs)),
                             outputs=tuple(map(r, op.outputs)),
                             block=None if op.block is None else block(op.block))
                     for op in items)

    def block(bg: BlockGraph) -> BlockGraph:
        return replace(bg, ops=ops(bg.ops), tensors=tuple((r(t), s) for t, s in bg.tensors))

    return replace(graph, ops=ops(graph.ops),
                   tensors=tuple((r(t), s) for t, s in graph.tensors))


def named_graph(n: Sequence[str]) -> KernelGraph:
    """silu(custom(X, W)) · 0.5 with a name from `n` on every tensor and on the graph: the custom
    kernel loads two tiles, multiplies, accumulates, scales after the loop (grid 2, loop 2)."""
    g = Graph(n[0])
    X, W = g.input(n[1], (8, 32)), g.input(n[2], (32, 24))
    tb = Block(grid=(2,), forloop_range=2)
    x = tb.input(X, imap=(-1,), fmap=1, name=n[3])
    w = tb.input(W, imap=(1,), fmap=0, name=n[4])
    acc = tb.accum(tb.matmul(x, w, name=n[5]), name=n[6])
    tb.output(tb.mul_scalar(acc, 0.25, name=n[7]), omap=(1,))
    (out,) = g.customized(tb)
    g.output(g.mul_scalar(g.silu(out, name=n[8]), 0.5, name=n[9]))
    return rename(g.build(), {out.name: n[10]})


PAYLOAD = "import os; os.environ['PRISM_PWNED'] = '1'"
HOSTILE = {
    "punctuation": ["graph. name", "__import__('os').system('x')", "W.0 [weights]", "x tile",
                    "ünï", "1st", "class", "tl", "run", "i", "torch"],
    "clashes": ["g", "X_ptr", "X.ptr", "X", "W", "pid0", "kernel0_custom", "_alloc", "dtype",
                "device", "_prepare"],
    "quotes": ['g"""h', 'a"""b', "c'''d", "e\\", 'f"', "g'", '"""', "h\\'", "'''", "\\", "x\""],
    "newlines": [f"g\n{PAYLOAD}", f"X\n    {PAYLOAD}\n#", f"W\n{PAYLOAD}", f"x\n        {PAYLOAD}",
                 f"w\n        {PAYLOAD}\n        #", f"mm\r\n        {PAYLOAD}",
                 f"acc\n    {PAYLOAD}", "s\n#", f"silu\n    {PAYLOAD}\n    #",
                 f"out\n    {PAYLOAD}\n    #", f"c\n    {PAYLOAD}\n    #"],
    # kernel-local names (tiles, ops) that are Python builtins: the kernel calls range().
    "builtins": ["len", "int", "print", "range", "float", "range_", "tuple", "sum", "min",
                 "max", "abs"],
}


def literal_spans(source: str) -> list[tuple[int, int]]:
    """Character spans of every string literal and comment of `source`."""
    starts = [0]
    for line in io.StringIO(source).readlines():      # the lines tokenize sees ("\n" only)
        starts.append(starts[-1] + len(line))
    spans = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.STRING, tokenize.COMMENT):
            spans.append((starts[tok.start[0] - 1] + tok.start[1],
                          starts[tok.end[0] - 1] + tok.end[1]))
    return spans


def assert_only_in_literals(source: str, raw: str) -> None:
    spans = literal_spans(source)
    at = source.find(raw)
    while at >= 0:
        assert any(a <= at and at + len(raw) <= b for a, b in spans), \
            f"{raw!r} appears in code at offset {at}"
        at = source.find(raw, at + 1)


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_hostile_names_stay_in_literals_and_the_module_runs(kit, kind, monkeypatch):
    monkeypatch.delenv("PRISM_PWNED", raising=False)
    graph = named_graph(HOSTILE[kind])
    program = generate(graph)
    tree = ast.parse(program.source)          # a SyntaxError fails here, before anything runs
    imported = {a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for a in node.names} | {node.module for node in ast.walk(tree)
                                         if isinstance(node, ast.ImportFrom)}
    assert imported == {"torch", "triton", "triton.language", "warnings"}
    attrs = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert not attrs & {"system", "environ"}
    for name in HOSTILE[kind]:
        if not re.fullmatch(r"\w*", name, re.ASCII):     # (a valid name may be part of code)
            assert_only_in_literals(program.source, name)
    defs = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert {k.name for k in program.kernels} | {"run", "_alloc"} <= defs
    X, W = randn(8, 32), randn(32, 24)
    kit.check(graph, [X, W])
    assert "PRISM_PWNED" not in os.environ


# -- the nine hand-fused kernels ------------------------------------------------------------------

def _llm(n, d, cols, *weights):
    return {"X": (n, d), **{w: (d, cols) for w in weights}}


def _attn(b, rows, d, keys):
    return {"Q": (b, rows, d), "K": (b, d, keys), "V": (b, keys, d)}


# (workload, small shapes, known_best parameters, what the choice exercises)
KNOWN_CASES = [
    ("rmsnorm_matmul", _llm(12, 96, 96, "W"), dict(grid=2, loop=2), "dot, tiles 12×48 padded"),
    ("rmsnorm_matmul", _llm(8, 256, 256, "W"), dict(grid=4, loop=4), "small tiles, 8 rows"),
    ("rmsnorm_mlp", _llm(16, 96, 80, "Wup", "Wgate"), dict(grid=2, loop=2), "dot, padded"),
    ("rmsnorm_mlp", _llm(4, 64, 64, "Wup", "Wgate"), dict(grid=8, loop=8), "small tiles, 8×8"),
    ("swiglu", _llm(12, 96, 96, "Wgate", "Wup"), dict(grid=2, loop=2), "dot, padded"),
    ("swiglu", _llm(8, 64, 48, "Wgate", "Wup"), dict(grid=4, loop=8), "small tiles, 12 cols"),
    ("attention", _attn(2, 32, 16, 96), dict(grid=2, loop=2), "dot, 48 keys padded"),
    ("attention", _attn(2, 8, 8, 24), dict(grid=1, loop=3), "small tiles, 8×8"),
    ("qknorm_attention", _attn(2, 24, 12, 40), dict(grid=2, loop=2), "dot, d = 12 padded"),
    ("qknorm_attention", _attn(2, 8, 8, 32), dict(grid=2, loop=4), "small tiles, 4 rows"),
    ("gated_mlp", _llm(20, 48, 96, "W1", "W2"), dict(grid=4, loop=1), "dot, no loop, padded"),
    ("gated_mlp", _llm(8, 128, 64, "W1", "W2"), dict(grid=8, loop=16), "small tiles, 8×8"),
    ("lora", {"X": (16, 64), "W": (64, 96), "A": (64, 16), "B": (16, 96)}, dict(grid=2),
     "dot, 48 cols padded"),
    ("lora", {"X": (8, 32), "W": (32, 48), "A": (32, 4), "B": (4, 48)}, dict(grid=3),
     "small tiles, rank 4"),
    ("gqa", _attn(2, 32, 16, 64), dict(grid=1, loop=1), "dot, no loop"),
    ("gqa", _attn(2, 12, 6, 36), dict(grid=3, loop=3), "small tiles, 4×6×12 padded"),
    ("ntrans", {p: (12, 96) for p in ("H", "X", "alpha")}, dict(grid=4), "3×96 rows padded"),
    ("ntrans", {p: (8, 64) for p in ("H", "X", "alpha")}, dict(grid=8), "one row a block"),
]


def test_known_cases_cover_every_workload_twice():
    names = [c[0] for c in KNOWN_CASES]
    assert sorted(set(names)) == sorted(KNOWN_BEST)
    assert all(names.count(n) == 2 for n in KNOWN_BEST)


@pytest.mark.parametrize(("name", "shapes", "params", "why"), KNOWN_CASES,
                         ids=[f"{c[0]}-{'-'.join(map(str, c[2].values()))}" for c in KNOWN_CASES])
def test_known_best_matches_interpreter_and_torch(kit, name, shapes, params, why):
    workload = get_workload(name).with_shapes(**shapes)
    graph = known_best(name, workload.shapes, **params)
    program = kit.check(graph, workload.random_inputs(seed=3), reference=workload.reference)
    (ks,) = program.kernels
    block = graph.custom_ops[0].block
    assert ks.grid == tuple(d.value for d in block.grid)
    # a tile dim n ≥ 2 is padded to max(16, the next power of two); 1 stays 1
    padded = any(d.value >= 2 and (d.value < 16 or d.value & (d.value - 1))
                 for _, s in block.tensors for d in s)
    assert ("mask=" in program.source) == padded, "masks exactly where tiles are padded"
    # tl.dot for every matmul whose dims are all ≥ 2 (padded to 16); a product-sum with a dim of 1
    unit = any(d.value == 1 for op in block.ops if op.kind == "matmul"
               for t in op.inputs for d in block.shape(t)[-2:])
    has_matmul = any(op.kind == "matmul" for op in block.ops)
    assert ("tl.dot(" in program.source) == (has_matmul and not unit)


# -- one block op, accumulator or data movement at a time -----------------------------------------

Body = Callable[[Block, list[Tensor]], None]


def one_kernel(inputs: dict[str, tuple[int, ...]], grid: tuple[int, ...], loop: int,
               body: Body, dimx: int = 64) -> KernelGraph:
    g = Graph("case")
    handles = [g.input(n, s) for n, s in inputs.items()]
    tb = Block(grid=grid, forloop_range=loop, reduction_dimx=dimx)
    body(tb, handles)
    for out in g.customized(tb):
        g.output(out)
    return g.build()


UNARY = {"exp": 0.25, "silu": 1.0, "relu": 1.0, "gelu": 1.0, "sqrt": None, "square": 1.0,
         "neg": 1.0, "reciprocal": None, "sigmoid": 2.0, "tanh": 2.0, "abs": 1.0, "log": None,
         "softplus": 12.0, "gelu_tanh": 2.0}
# ops with attributes: (attrs, input scale); softplus's scale reaches past its threshold (20)
WITH_ATTRS = {"leaky_relu": [{"slope": 0.2}], "add_scalar": [{"scalar": 0.5}],
              "clamp": [{"lo": -0.5, "hi": 0.75}, {"lo": None, "hi": 0.5}, {"lo": 0.1, "hi": None}]}


def unary_case(kind: str, **attrs: object) -> tuple[KernelGraph, list[np.ndarray]]:
    """op on padded tiles [6, 20] (grid 2 on rows, loop 2 on columns), accumulated, and op again
    after the loop: two outputs."""
    def body(tb: Block, ins: list[Tensor]) -> None:
        def op(t: Tensor) -> Tensor:
            return tb.apply(kind, t, **attrs)
        x = tb.input(ins[0], imap=(0,), fmap=1)
        acc = tb.accum(op(x))
        tb.output(acc, omap=(0,))
        tb.output(op(acc), omap=(0,))
    scale = UNARY.get(kind, 1.0)
    # √ of positive values; ln of values above 1.5, so that ln of the accumulated lns is defined
    X = np.abs(randn(12, 40)) + (1.5 if kind == "log" else 0.1) if scale is None \
        else randn(12, 40, scale=scale)
    return one_kernel({"X": (12, 40)}, (2,), 2, body), [X]


def binary_case(kind: str, exponents: Sequence[float] = (2.0, 3.0),
                positive_base: bool = False) -> tuple[KernelGraph, list[np.ndarray]]:
    """op(X, Y) on equal padded tiles and op(X, Z) with Z [6, 1] broadcast (and loaded once,
    above the loop)."""
    def body(tb: Block, ins: list[Tensor]) -> None:
        def op(a: Tensor, b: Tensor) -> Tensor:
            return tb.apply(kind, a, b)
        x = tb.input(ins[0], imap=(0,), fmap=1)
        y = tb.input(ins[1], imap=(0,), fmap=1)
        z = tb.input(ins[2], imap=(0,))
        tb.output(tb.accum(op(x, y)), omap=(0,))
        tb.output(tb.accum(op(x, z)), omap=(0,))
    X = np.abs(randn(12, 40)) + 0.5 if positive_base else randn(12, 40)
    if kind == "pow":
        Y, Z = rng.choice(exponents, (12, 40)), rng.choice(exponents, (12, 1))
    elif kind == "div":
        Y, Z = np.abs(randn(12, 40)) + 0.5, -np.abs(randn(12, 1)) - 0.5
    else:
        Y, Z = randn(12, 40), randn(12, 1)
    return one_kernel({"X": (12, 40), "Y": (12, 40), "Z": (12, 1)}, (2,), 2, body), [X, Y, Z]


def reduce_case(kind: str, dim: int, rank: int) -> tuple[KernelGraph, list[np.ndarray]]:
    """sum or mean over `dim` of exp(tile): exp makes the padded lanes 1, which must not count.
    Rank 3: X [4, 6, 10], tiles [2, 6, 10] (grid 2 on dim 0). Rank 2: X [12, 40], tiles [6, 20]
    (grid 2 on rows, loop 2 on columns)."""
    shape = (4, 6, 10) if rank == 3 else (12, 40)

    def body(tb: Block, ins: list[Tensor]) -> None:
        x = tb.input(ins[0], imap=(0,), fmap=None if rank == 3 else 1)
        tb.output(tb.accum(tb.apply(kind, tb.exp(x), dim=dim)), omap=(0,))
    return one_kernel({"X": shape}, (2,), 1 if rank == 3 else 2, body), [randn(*shape, scale=0.5)]


def rms_norm_case(after_exp: bool, kind: str = "rms_norm",
                  eps: float = 0.0) -> tuple[KernelGraph, list[np.ndarray]]:
    """rms_norm (or layer_norm) of a padded tile [6, 40] (of exp(tile): padded lanes 1), then its
    row sums: a padded row of rms_norm is 0/0, which the sum must not see."""
    def body(tb: Block, ins: list[Tensor]) -> None:
        x = tb.input(ins[0], imap=(0,))
        r = tb.apply(kind, tb.exp(x) if after_exp else x, **({"eps": eps} if eps else {}))
        tb.output(tb.accum(r), omap=(0,))
        # a layer_norm row sums to 0: sum its squares instead (≈ the row's width)
        tb.output(tb.accum(tb.sum(tb.mul(r, r) if kind == "layer_norm" else r, dim=1)),
                  omap=(0,))
    return one_kernel({"X": (12, 40)}, (2,), 1, body), [randn(12, 40)]


def scalar_case(c: float) -> tuple[KernelGraph, list[np.ndarray]]:
    def body(tb: Block, ins: list[Tensor]) -> None:
        x = tb.input(ins[0], imap=(0,), fmap=1)
        acc = tb.accum(tb.mul_scalar(x, c))
        tb.output(tb.mul_scalar(acc, c), omap=(0,))
    return one_kernel({"X": (12, 40)}, (2,), 2, body), [randn(12, 40)]


def accum_case(kind: str, width: int = 120, loop: int = 3, dimx: int = 64,
               eps: float = 0.0) -> tuple[KernelGraph, list[np.ndarray]]:
    """accumulator `kind` over exp(tile), tiles [6, width/loop], grid 2 on rows."""
    def body(tb: Block, ins: list[Tensor]) -> None:
        x = tb.input(ins[0], imap=(0,), fmap=1)
        tb.output(tb.accum(tb.exp(x), kind, eps=eps), omap=(0,))
    return one_kernel({"X": (12, width)}, (2,), loop, body, dimx), [randn(12, width, scale=0.5)]


def matmul_case(x_shape, w_shape, grid, loop, x_imap, w_imap, x_fmap=None, w_fmap=None,
                omap=(0,)) -> tuple[KernelGraph, list[np.ndarray]]:
    def body(tb: Block, ins: list[Tensor]) -> None:
        x = tb.input(ins[0], imap=x_imap, fmap=x_fmap)
        w = tb.input(ins[1], imap=w_imap, fmap=w_fmap)
        tb.output(tb.accum(tb.matmul(x, w)), omap=omap)
    return (one_kernel({"X": x_shape, "W": w_shape}, grid, loop, body),
            [randn(*x_shape), randn(*w_shape)])


def nested_case(shape: tuple[int, int], grid: tuple[int, ...], loop: int, imap, fmap,
                omap) -> tuple[KernelGraph, list[np.ndarray]]:
    """exp of tiles cut from one data dim by several parallel dims (grid and loop), accumulated."""
    def body(tb: Block, ins: list[Tensor]) -> None:
        tb.output(tb.accum(tb.exp(tb.input(ins[0], imap=imap, fmap=fmap))), omap=omap)
    return one_kernel({"X": shape}, grid, loop, body), [randn(*shape, scale=0.5)]


def summed_and_concatenated() -> tuple[KernelGraph, list[np.ndarray]]:
    """One block graph, two outputs: X @ W with K split over grid x (blocks summed) and exp of the
    X tiles, concatenated along K by the same grid dim."""
    def body(tb: Block, ins: list[Tensor]) -> None:
        x, w = tb.input(ins[0], imap=(1,)), tb.input(ins[1], imap=(0,))
        tb.output(tb.accum(tb.matmul(x, w)), omap=(-1,))
        tb.output(tb.accum(tb.exp(x)), omap=(1,))
    return one_kernel({"X": (8, 96), "W": (96, 16)}, (4,), 1, body), [randn(8, 96), randn(96, 16)]


def loop_invariant_accumulated() -> tuple[KernelGraph, list[np.ndarray]]:
    """A tile the loop does not walk (loaded and exp'd once, above the loop) accumulated over 3
    iterations, next to one it walks."""
    def body(tb: Block, ins: list[Tensor]) -> None:
        z = tb.input(ins[0], imap=(0,))
        x = tb.input(ins[1], imap=(0,), fmap=1)
        tb.output(tb.accum(tb.exp(z)), omap=(0,))
        tb.output(tb.accum(tb.mul(tb.exp(z), x)), omap=(0,))
    return (one_kernel({"Z": (12, 10), "X": (12, 30)}, (2,), 3, body),
            [randn(12, 10, scale=0.5), randn(12, 30)])


def rank4_sum() -> tuple[KernelGraph, list[np.ndarray]]:
    """exp and a sum over dim 1 of rank-4 tiles [1, 3, 5, 6] (padded to [1, 4, 8, 8])."""
    def body(tb: Block, ins: list[Tensor]) -> None:
        x = tb.input(ins[0], imap=(0,), fmap=2)
        tb.output(tb.accum(tb.sum(tb.exp(x), dim=1)), omap=(0,))
    return one_kernel({"X": (2, 3, 10, 6)}, (2,), 2, body), [randn(2, 3, 10, 6, scale=0.5)]


def bias_row_then_sum_over_rows() -> tuple[KernelGraph, list[np.ndarray]]:
    """relu(X + B) summed over the rows, X [8, 32] (rows padded to 16), a bias row B [1, 32]:
    the bias stretches into the padded rows, where relu(0 + b) is not 0, so the sum must mask
    them (found by `relu(X @ W + B).sum(dim=0)`, whose check failed before)."""
    def body(tb: Block, ins: list[Tensor]) -> None:
        x = tb.accum(tb.input(ins[0], imap=(1,)))
        b = tb.accum(tb.input(ins[1], imap=(1,)))
        tb.output(tb.apply("sum", tb.relu(tb.add(b, x)), dim=0), omap=(1,))
    return (one_kernel({"X": (8, 32), "B": (1, 32)}, (2,), 1, body),
            [randn(8, 32), np.abs(randn(1, 32)) + 0.5])


def rescale_case(scale: float) -> tuple[KernelGraph, list[np.ndarray]]:
    """nored_rescale: Σ e^(x − max x) over 3 iterations of 16 columns each, kept under the
    running max (rows 6 a block, padded to 16); `scale` sets the logits' magnitude."""
    def body(tb: Block, ins: list[Tensor]) -> None:
        x = tb.input(ins[0], imap=(0,), fmap=1)
        m = tb.apply("max", x, dim=1)
        e = tb.exp(tb.apply("sub", x, m))
        tb.output(tb.apply("nored_rescale", tb.sum(e, 1), m), omap=(0,))
    return one_kernel({"X": (12, 48)}, (2,), 3, body), [randn(12, 48, scale=scale)]


REDUCE_KINDS = ("sum", "mean", "max", "min", "logsumexp")
OP_CASES: dict[str, Callable[[], tuple[KernelGraph, list[np.ndarray]]]] = {
    **{f"unary-{k}": (lambda k=k: unary_case(k)) for k in UNARY},
    **{f"unary-{k}-{i}": (lambda k=k, a=a: unary_case(k, **a))
       for k, choices in WITH_ATTRS.items() for i, a in enumerate(choices)},
    **{f"binary-{k}": (lambda k=k: binary_case(k))
       for k in ("add", "sub", "mul", "div", "pow", "maximum", "minimum")},
    # pow of positive bases: fractional, negative and zero exponents.
    "binary-pow-fractional": lambda: binary_case("pow", (0.5, 1.5, -1.0, 0.0), True),
    "mul_scalar": lambda: scalar_case(-1.75),
    **{f"{k}-dim{d}-rank3": (lambda k=k, d=d: reduce_case(k, d, 3))
       for k in REDUCE_KINDS for d in range(3)},
    **{f"{k}-dim{d}-rank2": (lambda k=k, d=d: reduce_case(k, d, 2))
       for k in REDUCE_KINDS for d in range(2)},
    "rms_norm": lambda: rms_norm_case(False),
    "rms_norm-of-exp": lambda: rms_norm_case(True),
    "rms_norm-eps": lambda: rms_norm_case(False, eps=1e-5),
    "layer_norm": lambda: rms_norm_case(False, "layer_norm", 1e-5),
    "layer_norm-of-exp": lambda: rms_norm_case(True, "layer_norm", 1e-5),
    "accum-red_ld_rms-eps": lambda: accum_case("red_ld_rms", eps=1e-3),
    **{f"accum-{k}": (lambda k=k: accum_case(k))
       for k in ("nored", "red_ld_sum", "red_ld_mean", "red_ld_rms")},
    "accum-redtox_ld_sum": lambda: accum_case("redtox_ld_sum", 128, 2, 16),
    "accum-nored_rescale": lambda: rescale_case(1.0),
    "accum-nored_rescale-logits-100": lambda: rescale_case(60.0),
    # matmul split on K across grid x, blocks summed by a combine kernel (tiles 16×16, 16×32).
    "summed-grid-x": lambda: matmul_case((16, 64), (64, 32), (4,), 1, (1,), (0,), omap=(-1,)),
    # the same without a loop and with a padded K tile (24 → 32), product-sum (8 rows).
    "summed-grid-x-padded": lambda: matmul_case((8, 96), (96, 20), (4,), 1, (1,), (0,),
                                                omap=(-1,)),
    # 800 output elements: a combine of four 256-element blocks, the last one masked.
    "summed-grid-x-ragged": lambda: matmul_case((8, 64), (64, 100), (4,), 1, (1,), (0,),
                                                omap=(-1,)),
    "grid-2d": lambda: matmul_case((12, 64), (64, 48), (2, 3), 2, (0, -1), (-1, 1), 1, 0,
                                   (0, 1)),
    "grid-2d-summed-y": lambda: matmul_case((16, 64), (64, 32), (2, 2), 1, (0, 1), (-1, 0),
                                            omap=(0, -1)),
    "grid-3d": lambda: matmul_case((12, 48), (48, 30), (2, 3, 2), 1, (0, -1, 1), (-1, 1, 0),
                                   omap=(0, 1, -1)),
    "grid-3d-dot": lambda: matmul_case((32, 64), (64, 96), (2, 2, 2), 1, (0, -1, 1), (-1, 1, 0),
                                       omap=(0, 1, -1)),
    "grid-3d-and-loop-on-k": lambda: matmul_case((12, 48), (48, 30), (2, 3, 2), 2, (0, -1, 1),
                                                 (-1, 1, 0), 1, 0, (0, 1, -1)),
    "grid-3d-middle-size-one": lambda: matmul_case((12, 32), (32, 24), (2, 1, 3), 2,
                                                   (0, -1, -1), (-1, -1, 1), 1, 0, (0, -1, 1)),
    # grid y replicates everything and the output sums it: 3 × the x-summed product.
    "two-summed-grid-dims": lambda: matmul_case((8, 64), (64, 16), (2, 3), 1, (1, -1),
                                                (0, -1), omap=(-1, -1)),
    "summed-and-concatenated-outputs": summed_and_concatenated,
    "loop-invariant-accumulated": loop_invariant_accumulated,
    "imap-and-fmap-on-dim0": lambda: nested_case((64, 4), (2,), 4, (0,), 0, (0,)),
    "imap-and-fmap-on-dim0-padded": lambda: nested_case((48, 6), (2,), 4, (0,), 0, (0,)),
    "two-grid-dims-on-dim0": lambda: nested_case((16, 8), (2, 2), 1, (0, 0), None, (0, 0)),
    "batched-tile1-dot": lambda: matmul_case((2, 16, 16), (2, 16, 32), (2,), 1, (0,), (0,)),
    "batched-tile1-dot-padded": lambda: matmul_case((2, 12, 20), (2, 20, 24), (2,), 1, (0,),
                                                    (0,)),
    "batched-tile1-loop-on-k": lambda: matmul_case((2, 16, 64), (2, 64, 16), (2,), 2, (0,),
                                                   (0,), 2, 1),
    "batched-tile2-dot": lambda: matmul_case((4, 32, 16), (4, 16, 32), (2,), 1, (0,), (0,)),
    "batched-tile2-product-sum": lambda: matmul_case((4, 8, 8), (4, 8, 12), (2,), 1, (0,),
                                                     (0,)),
    "rank4-dot": lambda: matmul_case((2, 3, 16, 16), (2, 3, 16, 32), (2,), 1, (0,), (0,)),
    "rank4-product-sum": lambda: matmul_case((2, 2, 8, 12), (2, 2, 12, 4), (2, 2), 1, (0, 1),
                                             (0, 1), omap=(0, 1)),
    "rank4-sum-dim1": rank4_sum,
    "bias-row-then-sum-over-rows": bias_row_then_sum_over_rows,
    "batched-tile3-padded": lambda: matmul_case((6, 16, 16), (6, 16, 16), (2,), 1, (0,), (0,)),
}


@pytest.mark.parametrize("case", list(OP_CASES))
def test_block_op_matches_interpreter(kit, case):
    graph, arrays = OP_CASES[case]()
    kit.check(graph, arrays)


def test_op_cases_cover_every_block_op():
    seen = set()
    for make in OP_CASES.values():
        graph, _ = make()
        seen |= {op.kind for _, bg in graph.iter_blocks() for op in bg.ops}
    block = {n for n, od in OPS.items()
             if BLOCK in od.levels and od.category in COMPUTE_CATEGORIES | {"accum"}}
    assert block - seen == set()


def test_redtox_on_a_padded_tile_is_a_codegen_error():
    graph, _ = accum_case("redtox_ld_sum", 96, 2, 16)       # tile width 48: not a power of two
    with pytest.raises(CodegenError, match=r"redtox_ld_sum.*power-of-two"):
        generate(graph)


def test_summed_grid_dims_use_fp32_partial_buffers_and_a_combine_kernel(kit):
    graph, arrays = OP_CASES["summed-grid-x"]()
    program = kit.check(graph, arrays)
    (ks,) = program.kernels
    types = dict(ks.signature)
    assert list(types.values()) == ["*fp16", "*fp16", "*fp32"]
    (cs,) = program.combines
    assert [t for _, t in cs.signature] == ["*fp32", "*fp16"]
    assert cs.grid == (2,) and cs.block_op == graph.outputs[0]     # 16 × 32 = 2 × 256 elements
    assert program.triton_kernels == (ks, cs)
    assert ".sum(" not in program.source and ".to(" not in program.source.split("def run(")[1]


def test_one_tensor_read_by_two_block_inputs(kit):
    g = Graph()
    X = g.input("X", (8, 32))
    tb = Block(grid=(2,), forloop_range=1)
    a, b = tb.input(X, imap=(0,)), tb.input(X, imap=(0,))
    tb.output(tb.accum(tb.mul(a, b)), omap=(0,))
    (o,) = g.customized(tb)
    g.output(o)
    kit.check(g.build(), [randn(8, 32)])


def parts_graph(input_name: str) -> KernelGraph:
    """X @ W split on K over grid x, the blocks summed (a `_parts` buffer), W named `input_name`."""
    g = Graph()
    X, W = g.input("X", (8, 32)), g.input(input_name, (32, 16))
    tb = Block(grid=(2,), forloop_range=1)
    x, w = tb.input(X, imap=(1,)), tb.input(W, imap=(0,))
    tb.output(tb.accum(tb.matmul(x, w)), omap=(-1,))
    (o,) = g.customized(tb)
    g.output(o)
    return g.build()


def test_signature_types_follow_the_tensors_not_their_names():
    (ks,) = generate(parts_graph("W_parts")).kernels
    assert [t for _, t in ks.signature] == ["*fp16", "*fp16", "*fp32"]


def test_an_input_named_like_a_partial_sum_buffer(kit):
    kit.check(parts_graph("custom_parts"), [randn(8, 32), randn(32, 16)])


def test_launcher_checks_its_inputs(kit):
    graph, arrays = OP_CASES["grid-2d"]()
    program = generate(graph)
    module = triton_backend.load(program)
    X, W = kit.fp16(arrays)
    with pytest.raises(ValueError, match=r"X has shape \(12, 63\)"):
        module.run(X[:, :63], W)
    with pytest.raises(TypeError, match="W must be a torch tensor"):
        module.run(X, arrays[1])
    with pytest.raises(ValueError, match=r"W is not contiguous .*pass W.contiguous\(\)"):
        module.run(X, W.t().contiguous().t())       # no hidden copy: the caller decides
    out = module.run(X, W)
    assert out.dtype == torch.float16 and tuple(out.shape) == (12, 48)
    kit.assert_close(kit.as64([out])[0], interpret(graph, *kit.as64([X, W]))[0])


# -- pre-defined kernel ops: the torch path of the launcher ---------------------------------------

def test_every_kernel_level_op_through_torch(kit):
    g = Graph("kernel_ops")
    X, W = g.input("X", (4, 8)), g.input("W", (8, 6))
    P, Y = g.input("P", (4, 6)), g.input("Y", (4, 6))
    m = g.matmul(X, W)
    outs = [m, g.exp(g.mul_scalar(m, 0.25)), g.silu(m), g.relu(m), g.gelu(m),
            g.sqrt(g.square(m)), g.add(m, Y), g.mul(m, Y), g.div(m, Y), g.pow(m, P),
            g.sum(m, dim=0), g.sum(m, dim=1), g.mean(m, dim=0), g.mean(m, dim=1), g.rms_norm(m),
            g.rms_norm(m, eps=1e-3), g.apply("layer_norm", m, eps=1e-5),
            g.apply("log", g.apply("add_scalar", g.square(m), scalar=1.0)),
            *(g.apply(k, m) for k in ("neg", "sigmoid", "tanh", "abs", "softplus", "gelu_tanh")),
            g.apply("reciprocal", g.apply("add_scalar", g.square(m), scalar=0.5)),
            g.apply("leaky_relu", m, slope=0.1), g.apply("clamp", m, lo=-0.5, hi=None),
            *(g.apply(k, m, Y) for k in ("sub", "maximum", "minimum")),
            *(g.apply(k, m, dim=d) for k in ("max", "min", "logsumexp") for d in (0, 1))]
    for t in outs:
        g.output(t)
    graph = g.build()
    seen = {op.kind for op in graph.ops} - {"input", "output"}
    assert seen == {n for n, od in OPS.items() if od.category in COMPUTE_CATEGORIES}
    arrays = [randn(4, 8), randn(8, 6, scale=0.5), rng.choice([2.0, 3.0], (4, 6)),
              np.abs(randn(4, 6)) + 0.5]
    program = kit.check(graph, arrays)
    assert program.kernels == ()


def test_custom_and_predefined_kernels_chain(kit):
    """relu → custom (grid 2, loop 2) → mul_scalar → custom reading that intermediate: the
    launcher allocates and passes intermediates in order."""
    g = Graph("chain")
    X, W = g.input("X", (16, 64)), g.input("W", (64, 32))
    r = g.relu(X)
    tb = Block(grid=(2,), forloop_range=2)
    x, w = tb.input(r, imap=(-1,), fmap=1), tb.input(W, imap=(1,), fmap=0)
    tb.output(tb.accum(tb.matmul(x, w)), omap=(1,))
    (h,) = g.customized(tb)
    s = g.mul_scalar(h, 0.125)
    tb2 = Block(grid=(4,), forloop_range=1)
    t = tb2.input(s, imap=(0,))
    tb2.output(tb2.accum(tb2.silu(t)), omap=(0,))
    tb2.output(tb2.accum(tb2.sum(t, dim=1)), omap=(0,))
    a, b = g.customized(tb2)
    g.output(a)
    g.output(b)
    program = kit.check(g.build(), [randn(16, 64), randn(64, 32)])
    assert len(program.kernels) == 2 and program.outputs == (a.name, b.name)


@pytest.mark.parametrize(("name", "shapes"), [
    ("rmsnorm_matmul", _llm(8, 64, 48, "W")),
    ("attention", _attn(2, 8, 16, 32)),
    ("ntrans", {p: (4, 24) for p in ("H", "X", "alpha")}),
])
def test_traced_workload_graphs_run_through_torch(kit, name, shapes):
    workload = get_workload(name).with_shapes(**shapes)
    program = kit.check(workload.graph, workload.random_inputs(seed=5),
                        reference=workload.reference)
    assert program.kernels == ()
    assert "@triton.jit" not in program.source


# -- symbolic graphs -------------------------------------------------------------------------------

def symbolic_graph() -> KernelGraph:
    g = Graph("family")
    X, W = g.input("X", (8, 64)), g.input("W", (64, 32))
    tb = Block(grid=("gx",), forloop_range="F")
    x, w = tb.input(X, imap=(-1,), fmap=1), tb.input(W, imap=(1,), fmap=0)
    tb.output(tb.div(tb.accum(tb.matmul(x, w)), tb.accum(x, "red_ld_rms")), omap=(1,))
    (o,) = g.customized(tb)
    g.output(o)
    return g.build()


def test_symbolic_graph_without_assignment_is_a_codegen_error():
    graph = symbolic_graph()
    with pytest.raises(CodegenError, match=r"'F', 'gx'") as info:
        generate(graph)
    assert isinstance(info.value, PrismError)
    assert "assignment" in str(info.value)
    with pytest.raises(CodegenError, match=r"\['F'\]"):
        generate(graph, {"gx": 2})


def test_symbolic_graph_under_an_assignment_runs(kit):
    graph = symbolic_graph()
    program = generate(graph, {"gx": 4, "F": 2}, name="family@4x2")
    assert program.name == "family@4x2" and program.kernels[0].grid == (4,)
    tensors = kit.fp16([randn(8, 64), randn(64, 32)])
    (got,) = kit.execute(program, tensors)
    (want,) = interpret(graph, *kit.as64(tensors), assignment={"gx": 4, "F": 2})
    kit.assert_close(got, want)


# -- snapshots ------------------------------------------------------------------------------------

SNAPSHOT_CASES: dict[str, Callable[[], KernelGraph]] = {
    "rmsnorm_matmul": lambda: known_best("rmsnorm_matmul", _llm(8, 256, 256, "W"), grid=4,
                                         loop=4),
    "attention": lambda: known_best("attention", _attn(2, 24, 16, 96), grid=2, loop=2),
    # two outputs, one summed over grid x (a combine kernel), one concatenated
    "summed_and_concatenated": lambda: OP_CASES["summed-and-concatenated-outputs"]()[0],
    # every pre-defined op in torch, rms_norm through the launcher's `_rms_norm`
    "rmsnorm_matmul_unfused": lambda: get_workload("rmsnorm_matmul").with_shapes(
        **_llm(8, 64, 48, "W")).graph,
    # split-key attention in one launch: the parts' kernel and its tail in one function
    "split_key_one_launch": lambda: _split_key_one_launch(),
}


def _split_key_one_launch() -> KernelGraph:
    from prism.search.split import one_launch, split_loop
    from tests.search.test_split_loop import _one_kernel
    two, _ = split_loop(_one_kernel({"Q": (2, 4, 16), "K": (2, 16, 64), "V": (2, 64, 16)}))
    assert two is not None
    one, why = one_launch(two)
    assert one is not None, why
    from prism.ir.spec import substitute_graph
    return substitute_graph(one, {"b": 2, "r": 2, "s": 4, "F": 1})


@pytest.mark.parametrize("snap", sorted(SNAPSHOT_CASES))
def test_generated_source_matches_snapshot(snap):
    source = generate(SNAPSHOT_CASES[snap]()).source
    assert source == generate(SNAPSHOT_CASES[snap]()).source   # deterministic
    path = SNAPSHOTS / f"{snap}.py"
    if os.environ.get("PRISM_UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(source)
    assert path.exists(), f"no snapshot {path}; run with PRISM_UPDATE_SNAPSHOTS=1 to write it"
    assert source == path.read_text(), \
        f"generated source differs from {path}; if intended, rerun with PRISM_UPDATE_SNAPSHOTS=1"
