"""Split closes: a first kernel stores partial sums over a grid dim, concatenated along the last
dim (`KernelState.with_custom(split=)`), and a second kernel sums them (`redtox_ld_sum`, or
`red_ld_sum` of a last dim of 1) — split-key attention, as in Mirage's own gqa μGraphs.

Oracles: the verifier's symbolic proof replayed, random testing against the float64 reference
at several split counts, and the abstract expression of the target's e-graph."""

import itertools
from collections import Counter
from dataclasses import replace

import pytest
import torch

import prism
from prism.cost import get_device
from prism.ir.spec import problems
from prism.search import SearchConfig, driver
from prism.search.abstract import AbstractTarget
from prism.search.audit import best_assignment
from prism.search.maps import _canonical, instantiate
from prism.search.state import BlockState, KernelState, Tensor
from prism.verify.equiv import verify
from prism.verify.randomized import random_test
from prism.verify.translate import leaf


@prism.workload(Q=(1, 16, 16), K=(1, 16, 256), V=(1, 256, 16))
def tiny_attention(Q, K, V):
    e = torch.exp(Q @ K)
    return (e / e.sum(-1, keepdim=True)) @ V


SPLIT = SearchConfig(max_custom_kernels=2, max_block_outputs=2, max_block_ops=5,
                     max_accumulators=2, grid_dims=(2,), block_ops=("matmul", "exp", "div"),
                     accumulators=("nored", "red_ld_sum", "redtox_ld_sum"), budget_s=600)


def _envs(graph, want=2):
    """Up to `want` well-formed assignments of the graph's sizes, with different split counts
    (every size from 1, 2, 4, 8)."""
    names = sorted(graph.free_vars())
    out, counts = [], set()
    for combo in itertools.product((1, 2, 4, 8), repeat=len(names)):
        env = dict(zip(names, combo, strict=True))
        if env.get("gx") not in counts and not problems(graph, env):
            out.append(env)
            counts.add(env.get("gx"))
        if len(out) == want:
            break
    return out


def _split(graph):
    """Whether a kernel tensor's shape names a grid size: partial sums of a split close."""
    return any(d.free_vars() for name, shape in graph.tensors if name.startswith("t")
               for d in shape)


def _split_key_family():
    """Split-key attention built through the search's own states: kernel 1 stores exp(QK)V and
    the row sums of exp(QK) as partial sums over grid dim 0; kernel 2 sums both and divides."""
    target = tiny_attention.graph
    abstract = AbstractTarget(target)
    inputs = [Tensor(t, target.shape(t), leaf(n))
              for t, n in zip(target.inputs, abstract.inputs, strict=True)]
    kernel = KernelState(tuple(inputs), (), 3)
    b = BlockState.open(0, 2, inputs)
    b = b.extend("matmul", (0, 1), (1,), False)          # 3: q k
    b = b.extend("exp", (3,), (2,), False)               # 4
    b = b.extend("red_ld_sum", (4,), (3,), True)         # 5: row sums (post-loop)
    b = b.extend("matmul", (4, 2), (4,), False)          # 6: exp · v
    b = b.extend("nored", (6,), (5,), True)              # 7 (post-loop)
    kernel = kernel.with_custom(b, (7, 5), (6,), split=0)
    num, den = kernel.tensors[3:]
    assert num.split and den.split
    assert [str(d) for d in num.shape] == ["1", "16", "16*gx"]
    assert [str(d) for d in den.shape] == ["1", "16", "gx"]
    c = BlockState.open(1, 2, [num, den])
    c = c.extend("redtox_ld_sum", (0,), (7,), True, {"dimx": 16})
    c = c.extend("red_ld_sum", (1,), (8,), True)
    c = c.extend("div", (2, 3), (9,), False)
    kernel = kernel.with_custom(c, (4,), (10,))
    return target, abstract, kernel, c


def test_a_split_key_family_computes_the_target_abstractly_and_its_members_are_proved():
    target, abstract, kernel, _ = _split_key_family()
    out = kernel.tensors[-1]
    assert not out.split and abstract.output_index(out.term) == 0
    # the partial sums' own expressions are the target's subterms, but no output
    assert abstract.lookup(kernel.tensors[3].term) is not None
    graph = kernel.graph((len(kernel.tensors) - 1,))
    members = list(instantiate(graph, kernel.equalities))
    assert members
    proved = []
    for member in members:
        verdict = verify(target, member)
        if verdict.verdict != "equivalent":
            continue
        proved.append(member)
        assert verdict.sizes == "symbolic"
        envs = _envs(member)
        assert len(envs) == 2 and any(e["gx"] > 1 for e in envs)
        assert random_test(target, member, assignments=envs).equal
    assert proved
    # a proved member fits the device and is modeled
    assert any(best_assignment(m, get_device("h100")) is not None for m in proved)


def test_a_split_tile_is_read_only_by_the_accumulator_that_sums_it():
    _, _, kernel, _ = _split_key_family()
    num, den = kernel.tensors[3:5]
    c = BlockState.open(1, 1, [num, den])
    # the search offers redtox on the numerator (width 16) and red_ld_sum on the row sums
    from prism.search.generate import _sums_splits
    assert not _sums_splits("exp", [c.tensors[0]])
    assert not _sums_splits("red_ld_sum", [c.tensors[0]])      # would sum across d too
    assert _sums_splits("red_ld_sum", [c.tensors[1]])
    assert _sums_splits("redtox_ld_sum", [c.tensors[0]])
    assert not _sums_splits("redtox_ld_sum", [Tensor("x", (), leaf("x"))])
    # no map splits the partial sums' last dim: the equality the map instantiation enforces
    summed = c.extend("redtox_ld_sum", (0,), (1,), True, {"dimx": 16})
    assert any(e.where == "redtox_ld_sum2_1" for e in summed.equalities)
    assert not _sums_splits("matmul", [c.tensors[0], c.tensors[1]])


def test_a_pinned_grid_dim_stays_in_place_under_the_symmetry_check():
    imaps = [(-1, 0), (2, 0), (1, 0)]
    assert _canonical(imaps, 2)
    swapped = [(0, -1), (0, 2), (0, 1)]
    assert not _canonical(swapped, 2)
    assert _canonical(swapped, 2, frozenset({0}))


def test_the_search_finds_split_key_programs_proves_and_models_them():
    """The search itself (no program written for it) reaches split-key programs: kernel 1
    stores partial sums, kernel 2 sums and divides. Every split candidate it calls equivalent
    agrees with the float64 reference at two split counts."""
    result = driver.search(tiny_attention.graph, replace(SPLIT, max_families=2500))
    split = [c for c in result.candidates if _split(c.graph)]
    verdicts = Counter(c.verdict.verdict for c in split)
    assert verdicts["equivalent"] >= 1, verdicts
    modeled = [c for c in split if c.modeled_us is not None]
    assert modeled and all(c.num_kernels == 2 for c in split)
    for c in [c for c in split if c.verdict.verdict == "equivalent"][:4]:
        envs = _envs(c.graph)
        assert any(e["gx"] > 1 for e in envs)
        assert random_test(tiny_attention.graph, c.graph, assignments=envs).equal, c.id


def test_split_settings_are_checked():
    with pytest.raises(prism.errors.PrismError, match="max_block_outputs"):
        SearchConfig(max_block_outputs=0)
    assert SearchConfig(accumulators=("redtox_ld_sum",), max_block_outputs=2).to_json()[
        "max_block_outputs"] == 2
    assert "max_block_outputs" not in SearchConfig().to_json()
