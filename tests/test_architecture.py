"""The architecture of DESIGN.md §2, enforced: dependency direction between engine packages,
heavy dependencies behind one module each, and an engine with no Jupyter imports."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRISM = ROOT / "prism"

# package → the prism packages it may import (besides itself and prism.errors)
ALLOWED = {
    "trace": set(),
    "ir": set(),
    "frontend": {"ir", "trace"},
    "workloads": {"ir", "frontend"},
    "expr": {"ir"},
    "verify": {"ir", "expr", "trace"},
    "search": {"ir", "expr", "verify", "trace", "smt", "cost"},   # smt: the z3 module (lazy z3)
    "cost": {"ir"},
    "instantiate": {"ir", "search", "cost"},
    "tune": {"ir", "cost", "instantiate", "trace"},
    # step records: the search's own transitions and rules' evidence, re-checked
    "steps": {"ir", "expr", "verify", "search", "cost", "smt", "trace"},
    # the learned evaluator: trained on searches' states and the tuner's configurations; the
    # search takes its order as a value (`SearchConfig.order`), never importing it
    "learn": {"ir", "cost", "search", "steps", "trace", "instantiate", "workloads", "pipeline"},
}
# heavy dependency → the only modules that may import it
HEAVY = {
    "torch": {"prism/frontend/fx.py", "prism/frontend/workload.py", "prism/workloads/library.py",
              "prism/tune/backends.py", "prism/instantiate/triton_backend.py",
              # the microbenchmarks' buffers (their kernels load through triton_backend)
              "prism/tune/calibrate.py",
              # the torch.compile backend: Dynamo's graphs are its input
              "prism/dynamo.py",
              # the learned evaluator's network (only when the learned order is asked for)
              "prism/learn/model.py"},
    "graphviz": {"prism/ir/render.py"},
    "z3": {"prism/smt.py"},
    "triton": {"prism/instantiate/triton_backend.py"},
    "egglog": {"prism/expr/egglog_oracle.py"},
    "ray": {"prism/search/executors.py"},
}
JUPYTER = {"ipywidgets", "IPython", "anywidget", "widgets", "plotly", "jupyter", "jupyterlab",
           "ipykernel", "nbclient"}


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def modules():
    return sorted(PRISM.rglob("*.py"))


def test_engine_packages_import_in_one_direction():
    for path in modules():
        rel = path.relative_to(PRISM)
        if len(rel.parts) < 2 or rel.parts[0] not in ALLOWED:
            continue
        package = rel.parts[0]
        for name in imports(path):
            parts = name.split(".")
            if parts[0] != "prism" or len(parts) < 2 or parts[1] in ("errors", package):
                continue
            assert parts[1] in ALLOWED[package], f"{rel} imports {name}"


def test_heavy_dependencies_live_behind_one_module():
    for path in modules():
        rel = str(path.relative_to(ROOT))
        for name in imports(path):
            top = name.split(".")[0]
            if top in HEAVY:
                assert rel in HEAVY[top], f"{rel} imports {top}; only {HEAVY[top]} may"
            assert top not in JUPYTER, f"{rel} imports {top}: the engine never imports Jupyter"


def test_import_prism_stays_light():
    code = ("import sys, prism, prism.workloads, prism.trace; "
            "heavy = [m for m in ('torch', 'graphviz', 'z3', 'triton', 'egglog', 'plotly', 'ray') "
            "if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
