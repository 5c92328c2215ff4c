"""Search states from graphs, and the search's own steps applied to them.

A *state* is what a family of the search is: a kernel graph being built and, when a custom
kernel is open, its block graph being built (`prism.search.state`). Its text is the text form
(`prism.ir.text`) of the family's graph, the one a trace records with `--trace-graphs`, without
its name. `rebuild` reads a state back from that graph by replaying its ops through the search's
own transitions (`BlockState.open`, `extend`, `replay`, `KernelState.with_custom`,
`with_kernel_op`) and raises `StepError` unless the replay gives the graph back exactly: so a
graph that is no state of the search (a corrupted one, a hand-edited one) is told apart.

An *action* is one decision of the generator, as a JSON object:

    {"kind": "open_kernel", "inputs": ["X", "W"]}              open a custom kernel on these
    {"kind": "add_op", "op": "matmul", "inputs": ["X_tile", "W_tile"], "attrs": {},
     "output": "matmul2"}                                        one block op (or accumulator)
    {"kind": "add_kernel_op", "op": ..., "inputs": [...], "attrs": {}, "output": "t3"}
    {"kind": "close_block", "stores": ["div5"], "grid_dims": 1, "split": null,
     "outputs": ["t2"]}                                          store the block's tiles

`apply` makes the next state from a state and an action, as the generator does; `derive` finds
the action that leads from one state to the next (None when no single step does).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from prism.errors import PrismError
from prism.ir.graph import KernelGraph, Op
from prism.ir.ops import OPS
from prism.ir.text import to_text
from prism.search.state import BlockState, KernelState, Tensor
from prism.verify.translate import leaf, tensor_leaf


class StepError(PrismError):
    """A state or an action that is not one the search makes."""


@dataclass(frozen=True)
class State:
    kernel: KernelState
    block: BlockState | None = None

    def graph(self) -> KernelGraph:
        """The family's graph as the search records it, unnamed."""
        return self.kernel.graph(open_block=self.block, name="")

    def text(self) -> str:
        return to_text(self.graph())

    def new_tensor(self) -> Tensor:
        """The tensor the last step made (a block's last tile, else the last kernel tensor)."""
        return self.block.tensors[-1] if self.block is not None else self.kernel.tensors[-1]


def root(graph: KernelGraph) -> State:
    """The state before the first decision: the graph's inputs, nothing else."""
    inputs = tuple(Tensor(t, graph.shape(t), leaf(tensor_leaf(t))) for t in graph.inputs)
    return State(KernelState(inputs, (), len(inputs)))


def rebuild(graph: KernelGraph) -> State:
    """The search state whose graph is `graph` (its name aside); `StepError` when none is."""
    state = root(graph)
    for op in graph.ops:
        if op.kind == "input":
            continue
        if state.block is not None:
            raise StepError(f"op {op.kind} {', '.join(op.outputs)} follows an open custom "
                            "kernel: a search state has its open block graph last")
        if op.kind == "output":
            raise StepError("the graph has output ops: a search state has none (it is a family "
                            "being built, not a program)")
        if op.kind != "customized":
            state = _apply(state, {"kind": "add_kernel_op", "op": op.kind,
                                   "inputs": list(op.inputs), "attrs": _attrs_json(op)})
            continue
        assert op.block is not None
        block = _open(state.kernel, list(op.inputs), len(op.block.grid))
        for bop in op.block.ops:
            if bop.kind not in ("input", "output"):
                block = _extend(block, bop.kind, list(bop.inputs), _attrs_json(bop))
        stores = [b.inputs[0] for b in op.block.ops if b.kind == "output"]
        if not stores:
            state = State(state.kernel, block)
            continue
        made = [graph.shape(t) for t in op.outputs]
        closed = None
        for split in (None, 0):
            try:
                kernel = _close(state.kernel, block, stores, split, replay=False)
            except PrismError:
                continue
            if [t.shape for t in kernel.tensors[len(state.kernel.tensors):]] == made:
                closed = kernel
                break
        if closed is None:
            raise StepError(f"custom kernel {', '.join(op.outputs)}: no close of its block "
                            "graph stores these shapes")
        state = State(closed)
    got = state.graph()
    if got != replace(graph, name=""):
        raise StepError("the graph is not the search's state for its ops: " +
                        _first_difference(to_text(got), to_text(replace(graph, name=""))))
    return state


def apply(state: State, action: dict[str, Any]) -> State:
    """The state the generator makes from `state` by `action`; `StepError` when it cannot."""
    try:
        return _apply(state, action)
    except StepError:
        raise
    except (PrismError, KeyError, IndexError, TypeError, ValueError) as err:
        raise StepError(f"the action {action.get('kind')!r} cannot apply here: "
                        f"{type(err).__name__}: {err}") from None


def _apply(state: State, action: dict[str, Any]) -> State:
    kind = action.get("kind")
    kernel, block = state.kernel, state.block
    if kind == "open_kernel":
        if block is not None:
            raise StepError("open_kernel while a custom kernel is open")
        return State(kernel, _open(kernel, list(action["inputs"]), 1))
    if kind == "add_op":
        if block is None:
            raise StepError("add_op with no custom kernel open")
        out = _extend(block, action["op"], list(action["inputs"]), action.get("attrs", {}))
        _named(out.tensors[-1].name, action)
        return State(kernel, out)
    if kind == "add_kernel_op":
        if block is not None:
            raise StepError("add_kernel_op while a custom kernel is open")
        if action["op"] not in OPS or action["op"] in ("input", "output", "customized"):
            raise StepError(f"{action['op']!r} is no pre-defined kernel op")
        index = _indices(kernel.tensors, action["inputs"])
        out_k = kernel.with_kernel_op(action["op"], index, (), _attrs(action.get("attrs", {})))
        _named(out_k.tensors[-1].name, action)
        return State(out_k)
    if kind == "close_block":
        if block is None:
            raise StepError("close_block with no custom kernel open")
        split = action.get("split")
        closed = _close(kernel, block, list(action["stores"]), split,
                        grid_dims=int(action["grid_dims"]))
        made = [t.name for t in closed.tensors[len(kernel.tensors):]]
        if "outputs" in action and list(action["outputs"]) != made:
            raise StepError(f"close_block makes {made}, the action names {action['outputs']}")
        return State(closed)
    raise StepError(f"unknown action kind {kind!r} (known: open_kernel, add_op, "
                    "add_kernel_op, close_block)")


def derive(before: State, after: State) -> dict[str, Any] | None:
    """The one action that leads from `before` to `after`, read off their ops; None when no
    single generator step does (whether it does exactly is `apply`'s to show)."""
    k0, k1, b0, b1 = before.kernel, after.kernel, before.block, after.block
    if b0 is None and b1 is not None and k1.ops == k0.ops and len(b1.ops) == len(b1.sources):
        return {"kind": "open_kernel", "inputs": list(b1.sources)}
    if b0 is not None and b1 is not None and k1.ops == k0.ops and b1.ops[:-1] == b0.ops:
        op = b1.ops[-1]
        return {"kind": "add_op", "op": op.kind, "inputs": list(op.inputs),
                "attrs": _attrs_json(op), "output": op.outputs[0]}
    if b1 is not None or k1.ops[:-1] != k0.ops or len(k1.ops) != len(k0.ops) + 1:
        return None
    op = k1.ops[-1]
    if b0 is None and op.kind != "customized":
        return {"kind": "add_kernel_op", "op": op.kind, "inputs": list(op.inputs),
                "attrs": _attrs_json(op), "output": op.outputs[0]}
    if b0 is not None and op.kind == "customized" and op.block is not None:
        stores = [b.inputs[0] for b in op.block.ops if b.kind == "output"]
        return {"kind": "close_block", "stores": stores, "grid_dims": len(op.block.grid),
                "split": 0 if k1.tensors[-1].split else None, "outputs": list(op.outputs)}
    return None


# -- the search's transitions ----------------------------------------------------------------

def _open(kernel: KernelState, inputs: list[str], grid_dims: int) -> BlockState:
    sources = [kernel.tensors[i] for i in _indices(kernel.tensors, inputs)]
    return BlockState.open(kernel.custom, grid_dims, sources)


def _extend(block: BlockState, kind: str, inputs: list[str], attrs: dict[str, Any]
            ) -> BlockState:
    if kind not in OPS:
        raise StepError(f"unknown op {kind!r}")
    accumulator = OPS[kind].category == "accum"
    return block.extend(kind, _indices(block.tensors, inputs), (), accumulator, _attrs(attrs))


def _close(kernel: KernelState, block: BlockState, stores: list[str], split: int | None, *,
           grid_dims: int | None = None, replay: bool = True) -> KernelState:
    sources = [kernel.tensors[i] for i in _indices(kernel.tensors, list(block.sources))]
    if replay:      # the block was built with one grid dim; its count is chosen at the close
        block = block.replay(grid_dims or len(block.grid), sources)
    outputs = _indices(block.tensors, stores)
    if sorted(outputs) != block.open_tensors:
        raise StepError(f"close_block stores {stores}, but the tiles waiting for a consumer "
                        f"are {[block.tensors[i].name for i in block.open_tensors]}")
    if split not in (None, 0):
        raise StepError(f"close_block split is {split!r}: the search splits grid dim 0 or none")
    return kernel.with_custom(block, outputs, (), split=split)


def _indices(tensors: tuple[Tensor, ...], names: list[str]) -> tuple[int, ...]:
    where = {t.name: i for i, t in enumerate(tensors)}
    missing = [n for n in names if n not in where]
    if missing:
        raise StepError(f"no tensor named {missing[0]!r} in this state "
                        f"(it has {', '.join(where)})")
    return tuple(where[n] for n in names)


def _named(made: str, action: dict[str, Any]) -> None:
    if "output" in action and action["output"] != made:
        raise StepError(f"the op makes {made}, the action names {action['output']!r}")


def _attrs_json(op: Op) -> dict[str, Any]:
    """An op's attributes as JSON (tuples as lists; `_attrs` reads them back)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in op.attrs}


def _attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in attrs.items()}


def _first_difference(got: str, want: str) -> str:
    for a, b in zip(got.splitlines(), want.splitlines(), strict=False):
        if a != b:
            return f"replayed {a.strip()!r} where the graph has {b.strip()!r}"
    return f"replayed {len(got.splitlines())} lines where the graph has {len(want.splitlines())}"
