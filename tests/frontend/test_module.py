"""`prism.workload.from_module`: an nn.Module traced with its parameters as inputs of fixed
shape, whose values the workload takes from the module. The oracle is the module itself, run by
torch in float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import prism
from prism.errors import ShapeError

D, H = 8, 12


class GatedMLP(nn.Module):
    """A small user block: down(silu(gate(x)) · up(x)), after an RMSNorm."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(D, eps=1e-6)
        self.gate = nn.Linear(D, H, bias=False)
        self.up = nn.Linear(D, H, bias=False)
        self.down = nn.Linear(H, D)

    def forward(self, x):
        h = self.norm(x)
        return self.down(nn.functional.silu(self.gate(h)) * self.up(h)) + x


MODULES = {
    "linear": lambda: nn.Linear(D, H),
    "linear_no_bias": lambda: nn.Linear(D, H, bias=False),
    "rms_norm": lambda: nn.RMSNorm(D),
    "rms_norm_eps": lambda: nn.RMSNorm(D, eps=1e-5),
    "layer_norm": lambda: nn.LayerNorm(D),
    "layer_norm_no_affine": lambda: nn.LayerNorm(D, elementwise_affine=False),
    "silu": lambda: nn.SiLU(),
    "gelu": lambda: nn.GELU(),
    "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
    "relu": lambda: nn.ReLU(),
    "sequential": lambda: nn.Sequential(nn.Linear(D, H), nn.GELU(), nn.Linear(H, D)),
    "gated_mlp": GatedMLP,
}


@pytest.mark.parametrize("name", sorted(MODULES))
@pytest.mark.parametrize("batch", [(4,), (2, 3)])
def test_module_graph_matches_the_module(name, batch):
    torch.manual_seed(0)
    module = MODULES[name]()
    for p in module.parameters():       # not the init's ones and zeros: real values
        nn.init.normal_(p, std=0.5)
    w = prism.workload.from_module(module, torch.zeros(*batch, D))
    arrays = w.random_inputs(0)
    for (path, tensor), array in zip(module.named_parameters(), arrays[1:], strict=False):
        np.testing.assert_array_equal(array, tensor.detach().double().numpy(), err_msg=path)
    x = torch.from_numpy(arrays[0])
    want = module.double()(x).detach().numpy()
    np.testing.assert_allclose(w.reference(*arrays)[0], want, rtol=1e-12, atol=1e-12)
    graph = w.graph
    got = graph.to_user(prism.interpret(graph, *graph.to_ir(arrays)))[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())


def test_parameters_are_inputs_named_after_their_paths():
    w = prism.from_module(nn.Sequential(nn.Linear(D, H), nn.SiLU(), nn.Linear(H, 2)),
                          (4, D))
    assert w.graph.inputs == list(w.shapes) == ["input", "t_0_weight", "t_0_bias", "t_2_weight",
                                                "t_2_bias"]
    assert w.shapes["t_0_weight"] == (H, D)           # the user's layout; the IR reads it as Wᵀ
    block = prism.from_module(GatedMLP(), (4, D))
    assert list(block.shapes) == ["x", "norm_weight", "gate_weight", "up_weight", "down_weight",
                                  "down_bias"]


def test_only_the_inputs_take_new_shapes():
    w = prism.from_module(nn.Linear(D, H), (4, D))
    wider = w.with_shapes(input=(16, D))
    assert wider.shapes["input"] == (16, D) and wider.graph.shape("input")[0].value == 16
    with pytest.raises(ShapeError, match="weight is the module's tensor"):
        w.with_shapes(weight=(H, 2 * D))


def test_example_inputs_must_match_the_forward():
    with pytest.raises(ShapeError, match=r"forward takes 1 input\(s\)"):
        prism.from_module(nn.Linear(D, H), (4, D), (4, D))
