"""Set-maps steps: a closed family's symbolic imap/fmap/omap chosen, giving one member.

    before    the complete family: the closed kernel graph with its kernel outputs, every map
              entry still a 0/1 variable and the grid sizes and loop range symbolic
    action    {"kind": "set_maps", "kernels": [<per custom kernel: grid, forloop_range, each
              input's imap and fmap, each stored tile's omap (Mirage's -1 form)>]}
              (`prism.search.maps.map_summary` of the member)
    after     the member: concrete maps, sizes still symbolic
    evidence  the family's dimension equalities (what the map choice must satisfy), the
              candidate the member became and whether it was proved or refuted

Replay (`member_for`): the family is rebuilt as a search state (its output ops aside), its
equalities are the state's own, and the member is made again by the search's map instantiation
(`maps.instantiate`, which cuts every choice that breaks an equality, breaks grid symmetry and
collapses unused dims), or, for several custom kernels, kernel by kernel as the search verifies
them (`maps.kernel_members`): the member whose map choice is the action's. A choice the search
would not make is found by neither, and the record fails.
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from typing import Any

from prism.ir.graph import KernelGraph
from prism.ir.text import from_text, to_text
from prism.search.maps import (
    block_bits,
    free_bits,
    instantiate,
    kernel_members,
    kernel_program,
    map_summary,
    with_blocks,
)
from prism.steps.states import State, StepError, rebuild

MAP_LIMIT = 512         # the members the search instantiates per family (`driver.MAP_LIMIT`)


def complete(graph: KernelGraph) -> tuple[State, tuple[int, ...]]:
    """The closed search state of a complete family and its kernel outputs (indices into the
    state's tensors); `StepError` when `graph` is no complete family the search makes."""
    names = [op.inputs[0] for op in graph.ops if op.kind == "output"]
    state = rebuild(replace(graph, ops=tuple(op for op in graph.ops if op.kind != "output")))
    if state.block is not None:
        raise StepError("a complete family has no open custom kernel")
    where = {t.name: i for i, t in enumerate(state.kernel.tensors)}
    if not names or any(n not in where for n in names):
        raise StepError(f"the family's outputs {names} are not its kernel tensors")
    outputs = tuple(where[n] for n in names)
    if state.kernel.graph(outputs, name="") != replace(graph, name=""):
        raise StepError("the graph is not the complete family of its search state")
    return state, outputs


def family_text(state: State, member: KernelGraph) -> str:
    """The complete family `member` was instantiated from: `state` closed, with the member's
    kernel outputs."""
    where = {t.name: i for i, t in enumerate(state.kernel.tensors)}
    names = [op.inputs[0] for op in member.ops if op.kind == "output"]
    if state.block is not None or any(n not in where for n in names):
        raise StepError("the member's family is not closed on its outputs")
    return to_text(state.kernel.graph(tuple(where[n] for n in names), name=""))


def choice(member: KernelGraph) -> dict[str, Any]:
    return {"kind": "set_maps", "kernels": map_summary(member)}


def equalities(state: State) -> list[str]:
    return [f"{e.a} = {e.b}" for e in state.kernel.equalities]


def member_for(before: str, action: dict[str, Any]) -> KernelGraph | None:
    """The member the search makes of the family `before` with the map choice of `action`;
    None when it makes none with that choice."""
    kernels = action.get("kernels")
    if not isinstance(kernels, list):
        raise StepError("a set_maps action names the maps of each custom kernel (`kernels`)")
    by_choice = _members(before)
    found = by_choice.get(_key(kernels))
    if found is not None:
        return found
    return _by_kernel(before, kernels)


@functools.lru_cache(maxsize=64)
def _members(before: str) -> dict[str, KernelGraph]:
    """Every member `maps.instantiate` makes of the family (at most MAP_LIMIT), by choice."""
    graph = from_text(before)
    state, _ = complete(graph)
    out: dict[str, KernelGraph] = {}
    for member in instantiate(graph, state.kernel.equalities, limit=MAP_LIMIT):
        out.setdefault(_key(map_summary(member)), replace(member, name=""))
    return out


def _by_kernel(before: str, kernels: list[Any]) -> KernelGraph | None:
    """A member of several custom kernels made kernel by kernel (the search's `_by_kernel`):
    each kernel's block the one of `kernel_members` whose maps are the action's."""
    graph = from_text(before)
    customs = [i for i, op in enumerate(graph.ops) if op.kind == "customized"]
    if len(customs) < 2 or len(kernels) != len(customs):
        return None
    blocks = {}
    for index, want in zip(customs, kernels, strict=True):
        block = _kernel_choices(before, index).get(_key([want]))
        if block is None:
            return None
        blocks[index] = block
    return replace(with_blocks(graph, blocks), name="")


@functools.lru_cache(maxsize=64)
def _kernel_choices(before: str, index: int) -> dict[str, Any]:
    graph = from_text(before)
    state, _ = complete(graph)
    block = graph.ops[index].block
    assert block is not None
    mine = [e for e in state.kernel.equalities if free_bits(e) & block_bits(block)]
    out: dict[str, Any] = {}
    for b in kernel_members(graph, index, mine, MAP_LIMIT):
        out.setdefault(_key(map_summary(kernel_program(graph, index, b))), b)
    return out


def _key(kernels: list[Any]) -> str:
    return json.dumps(kernels, sort_keys=True)


def check_set_maps(record: dict[str, Any]) -> str | None:
    """None when the record's member is the one the search makes of its family with its map
    choice, well-formed, under the family's own equalities; else what fails."""
    from prism.ir.spec import problems
    before, action = record["before"], record["action"]
    state, _ = complete(from_text(before))
    evidence = record.get("evidence", {})
    if evidence.get("equalities") != equalities(state):
        return "the evidence's dimension equalities are not the family's"
    member = member_for(before, action)
    if member is None:
        return "the search makes no member of this family with this map choice"
    got = to_text(member)
    if got != record.get("after"):
        from prism.steps.check import diff
        return f"the map choice gives another member: {diff(got, str(record.get('after')))}"
    wrong = problems(member)
    if wrong:
        return f"the member is not well-formed (prism.ir.spec): {wrong[0]}"
    return None
