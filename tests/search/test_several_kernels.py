"""Programs of several custom kernels: verified kernel by kernel, and branch and bound seeded
with a one-kernel program.

Oracles: the same search with every member verified whole (the verifier on the whole program,
as for one kernel), float64 interpretation against torch, a brute-force enumeration of sizes,
and the audit of the cost-bound rule (it re-explores what the rule pruned and verifies it)."""

import itertools
import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch

import prism
from prism.cli import main
from prism.cost import get_device, modeled
from prism.ir.interpret import interpret
from prism.ir.serialize import graph_to_json
from prism.ir.spec import problems, substitute_graph
from prism.search import SearchConfig, driver, search
from prism.search.audit import audit, best_assignment, feasible_assignments, within_limits
from prism.search.executors import Executor
from tests.search.recorded import as_recorded

H100 = get_device("h100")


@prism.workload(X=(4, 16), W1=(16, 32), W2=(32, 8))
def mlp(X, W1, W2):
    return torch.relu(X @ W1) @ W2


# A block reads at most two tensors, so the program needs two kernels: relu(X W1), then · W2.
TWO = SearchConfig(max_custom_kernels=2, max_block_inputs=2, block_ops=("matmul", "relu"),
                   max_block_ops=3, grid_dims=(1,))
# Three inputs and five ops make one kernel possible: the seed.
SEEDED = replace(TWO, max_block_inputs=3, max_block_ops=5)


def _key(cand):
    return json.dumps(graph_to_json(replace(cand.graph, name="")), sort_keys=True)


@pytest.fixture(scope="module")
def by_kernel():
    return search(mlp.graph, TWO)


def test_kernel_by_kernel_proves_exactly_what_whole_programs_prove(by_kernel):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(driver._Run, "_by_kernel", lambda self, *args: None)
        whole = search(mlp.graph, TWO)
    assert by_kernel.exhaustive and whole.exhaustive
    assert by_kernel.equivalent, "no program of two kernels was found"
    assert {_key(c) for c in by_kernel.equivalent} == {_key(c) for c in whole.equivalent}
    assert by_kernel.best.modeled_us == pytest.approx(whole.best.modeled_us, rel=1e-12)
    for cand in by_kernel.equivalent:
        assert len(cand.graph.custom_ops) == 2
        assert cand.verdict.method == "e-graph, kernel by kernel"
        assert [name for name, _ in cand.verdict.parts] == \
            [op.outputs[0] for op in cand.graph.custom_ops]
        assert all(v.verdict == "equivalent" and v.method == "e-graph" for _, v in
                   cand.verdict.parts)
    # the wrong map choices existed, and were left out instead of built into programs
    tally = by_kernel.summary()["by_kernel"]
    assert tally["kernel_choices_refuted"] > 0 and tally["kernel_choices_proved"] > 0
    assert len(whole.candidates) > len(by_kernel.candidates)


def test_every_program_proved_kernel_by_kernel_computes_the_mlp(by_kernel):
    arrays = mlp.random_inputs(0)
    (want,) = mlp.reference(*arrays)
    sample = by_kernel.equivalent[::20]
    assert sample
    for cand in sample:
        envs = sorted(feasible_assignments(cand.graph, H100), key=lambda e: math.prod(e.values()))
        for env in {json.dumps(e, sort_keys=True): e for e in (envs[0], envs[-1])}.values():
            (got,) = interpret(substitute_graph(cand.graph, env), *arrays)
            assert float(np.max(np.abs(got - want)) / np.max(np.abs(want))) < 1e-12, env


def test_the_best_assignment_kernel_by_kernel_is_the_best_of_the_whole_product(by_kernel):
    split = [c for c in by_kernel.equivalent
             if all(bg.free_vars() for _, bg in c.graph.iter_blocks())]
    assert split, "no program with sizes to choose in both kernels"
    for cand in split[:3]:
        names = sorted(cand.graph.free_vars())
        values = [2 ** k for k in range(6)]
        brute = min(modeled(substitute_graph(cand.graph, env), H100).latency_us
                    for env in (dict(zip(names, v, strict=True))
                                for v in itertools.product(values, repeat=len(names)))
                    if not problems(cand.graph, env) and within_limits(cand.graph, env, H100))
        latency, env = best_assignment(cand.graph, H100)
        assert latency == pytest.approx(brute, rel=1e-12)
        assert cand.modeled_us == pytest.approx(latency, rel=1e-12)
        assert set(env) == set(names)


@pytest.fixture(scope="module")
def seeded():
    return search(mlp.graph, SEEDED)


def test_a_one_kernel_seed_lets_the_cost_bound_prune_every_second_kernel(seeded):
    assert seeded.exhaustive
    seed = seeded.seed
    assert seed is not None and len(seed.graph.custom_ops) == 1
    assert seed.verdict.verdict == "equivalent"
    assert seeded.pruned["cost_bound"] > 0
    best = seeded.best
    assert len(best.graph.custom_ops) == 1
    assert best.modeled_us == pytest.approx(seed.modeled_us, rel=1e-12)
    assert seeded.summary()["seed"]["found_again_as"] is not None
    # what was pruned is not better: the audit explores it and verifies every program in it
    report = audit(mlp.graph, "cost_bound", SEEDED)
    assert report.sound and report.pruned == seeded.pruned["cost_bound"]
    assert report.checked > 0 and report.equivalent > 0


def test_a_search_of_one_kernel_has_no_seed():
    result = search(mlp.graph, replace(SEEDED, max_custom_kernels=1))
    assert result.seed is None and "seed" not in result.summary()


def test_several_kernels_give_the_same_result_on_processes(seeded):
    again = search(mlp.graph, SEEDED, executor=Executor("processes", 2))
    assert as_recorded(again) == as_recorded(seeded)


MLP_FILE = '''import torch
import prism


@prism.workload(X=(4, 16), W1=(16, 32), W2=(32, 8))
def mlp(X, W1, W2):
    return torch.relu(X @ W1) @ W2
'''


@pytest.mark.parametrize("caps, line", [
    (["--max-block-inputs", "2", "--max-block-ops", "3"], "proved kernel by kernel"),
    (["--max-block-ops", "5"], "branch and bound started from s1")])
def test_prism_search_says_how_several_kernels_were_searched(capsys, tmp_path, caps, line):
    path = tmp_path / "mlp.py"
    path.write_text(MLP_FILE)
    argv = ["search", f"{path}:mlp", "--max-custom-kernels", "2", "--block-ops", "matmul,relu",
            "--grid-dims", "1", *caps]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    text = capsys.readouterr().out
    shown = next(t for t in text.splitlines() if line in t)
    if "seed" in doc:
        assert f"{doc['seed']['modeled_us']:.2f} µs" in shown
        assert f"found again as {doc['seed']['found_again_as']}" in shown
    else:
        tally = doc["by_kernel"]
        assert f"{tally['kernel_choices_proved']} kernel map choices proved" in shown
        assert f"{tally['kernel_choices_refuted']} refuted" in shown
