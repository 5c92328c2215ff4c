"""The proof of one log-sum-exp split program, step by step (issue 19): safe attention
softmax(Q K / 4 − max) V at Q[2, 4, 8], K[2, 8, 64], V[2, 64, 8] in one kernel (grid over the
batch, every key in the block), split by `prism.search.split.split_softmax` into kernel 1 (the
keys over 4 blocks: each part's max and the sums under it) and kernel 2 (a loop over the 4
parts: rescaled to the max of the maxes and summed), proved against the traced program.

    .venv/bin/python bench/safe_split_proof.py [--out bench/results/safe_split_proof.md]

Each step is one axiom applied once (the checked explanation the verifier returns): its name,
direction, evidence (`smt`: z3 proved it; `random`: a randomized float64 check, the statement
says what it assumes), and the subterm it rewrote, abbreviated.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import prism
from prism.expr.axioms import AXIOMS_BY_NAME
from prism.frontend.builder import Block, Graph
from prism.ir.spec import substitute_graph
from prism.search.split import split_softmax
from prism.verify.equiv import verify

SHAPES = {"Q": (2, 4, 8), "K": (2, 8, 64), "V": (2, 64, 8)}
SIZES = {"b": 2, "r": 1, "s": 4, "b_2": 2, "r_2": 1}


@prism.workload(**SHAPES)
def safe_attention(Q, K, V):
    S = Q @ K * 0.25
    E = (S - S.amax(-1, keepdim=True)).exp()
    return (E / E.sum(-1, keepdim=True)) @ V


def one_kernel():
    g = Graph("one")
    Q, K, V = (g.input(p, SHAPES[p]) for p in ("Q", "K", "V"))
    tb = Block(grid=("b", "r"))
    q, k, v = tb.input(Q, imap=(0, 1)), tb.input(K, imap=(0, -1)), tb.input(V, imap=(0, -1))
    s = tb.mul_scalar(tb.matmul(q, k), 0.25)
    e = tb.exp(tb.apply("sub", s, tb.apply("max", s, dim=2)))
    tb.output(tb.div(tb.accum(tb.matmul(e, v)), tb.accum(tb.sum(e, 2))), omap=(0, 1))
    (out,) = g.customized(tb)
    g.output(out)
    return g.build()


def _short(text: str, n: int = 110) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    program, why = split_softmax(one_kernel())
    assert program is not None, why
    member = substitute_graph(program, SIZES)
    verdict = verify(safe_attention.graph, member)
    lines = [f"# The proof of a log-sum-exp split program (`{Path(__file__).name}`)", "",
             f"verdict: **{verdict.verdict}** by {verdict.method}, sizes {verdict.sizes} "
             f"({', '.join(f'{k}={v}' for k, v in SIZES.items())}), "
             f"{sum(len(s) for s in verdict.steps)} steps, {verdict.seconds:.2f} s", ""]
    (steps,) = verdict.steps
    used = Counter(s.rule for s in steps)
    lines += ["| axiom | uses | evidence | statement |", "|---|---|---|---|"]
    for name, n in sorted(used.items(), key=lambda kv: (-kv[1], kv[0])):
        ax = AXIOMS_BY_NAME[name]
        lines.append(f"| `{name}` | {n} | {ax.evidence} | {ax.statement} |")
    lines += ["", "| # | axiom | direction | evidence | rewrote | into |",
              "|---|---|---|---|---|---|"]
    for i, s in enumerate(steps, 1):
        ax = AXIOMS_BY_NAME[s.rule]
        rewrote, into = (_short(str(t.at(s.path))) for t in (s.before, s.after))
        lines.append(f"| {i} | `{s.rule}` | {s.direction} | {ax.evidence} | `{rewrote}` | "
                     f"`{into}` |")
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
