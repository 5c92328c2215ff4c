"""The winner's source by op: every op of every block graph has its lines, and they compute it."""

from __future__ import annotations

import itertools

from widgets.source import SourceState, SourceView, line_groups


def test_every_block_op_has_its_lines(recorded):
    best = recorded.result.best
    state = SourceState(best.triton_source)
    lines = best.triton_source.splitlines()
    groups = line_groups(best.triton_source)
    # consecutive, covering every line once
    assert groups[0].start == 0 and groups[-1].end == len(lines)
    assert all(a.end == b.start for a, b in itertools.pairwise(groups))
    for op in best.graph.custom_ops:
        block = op.block
        assert block is not None
        keys = {key.split("/", 1)[1] for key in state.ops}
        for bop in block.ops:
            if bop.kind == "output":
                assert any(k.startswith("store ") for k in keys)
            else:
                name = bop.outputs[0]
                assert name in keys, (name, keys)
                text = "\n".join(state.lines_of(next(k for k in state.ops
                                                     if k.endswith("/" + name))))
                # an input's lines load it; an op's lines assign it
                assert (f"{name} = tl.load" in text) if bop.kind == "input" else \
                    (f"{name} = " in text or f"{name} += " in text)


def test_choosing_an_op_lights_its_lines_only():
    source = ("@triton.jit\ndef kernel0_y(X_ptr, y_ptr):\n    pid0 = tl.program_id(0)\n"
              "    # X_tile: tile [8] of X\n    X_tile = tl.load(X_ptr)\n"
              "    # acc = nored(X_tile): fp32\n    acc = tl.zeros((8,), dtype=tl.float32)\n"
              "    # exp2 = exp(X_tile)\n    exp2 = tl.exp(X_tile)\n    acc += exp2\n"
              "    # store acc into y [8]\n    tl.store(y_ptr, acc)\n\n\ndef run(X):\n    pass\n")
    view = SourceView(source)
    assert view.state.ops == ["kernel0_y/X_tile", "kernel0_y/acc", "kernel0_y/exp2",
                              "kernel0_y/store y"]
    assert view.state.lines_of("kernel0_y/acc")[-1] == "    acc += exp2"   # the loop's update
    view.select("kernel0_y/exp2")
    lit = [part for part in view.code.value.split("<span") if "background" in part]
    assert len(lit) == 1 and "tl.exp(X_tile)" in lit[0] and "acc +=" not in lit[0]
    # and back: a click on an op's lines (what the page sends) chooses that op
    view.code.selected = "kernel0_y/acc"
    assert view.op.value == "kernel0_y/acc"
    lit = [part for part in view.code.value.split("<span") if "background" in part]
    text = "".join(lit)         # acc's two groups: its start and the loop's update
    assert all("data-op='kernel0_y/acc'" in part for part in lit)
    assert "acc = tl.zeros" in text and "acc += exp2" in text and "tl.exp(X_tile)" not in text
    view.code.selected = "kernel9/nothing"          # not an op of this source: nothing changes
    assert view.op.value == "kernel0_y/acc"
