"""Terms, rewrite rules and an e-graph with explanations (egg-style proof forest), with an
independent checker for its flat explanations. Standard library only."""

from prism.expr.egraph import EGraph, ENode, RunReport
from prism.expr.proof import Step, check_explanation
from prism.expr.rules import (
    BACKWARD,
    FORWARD,
    Analysis,
    Facts,
    Pattern,
    Rule,
    TermFacts,
    fold_data,
)
from prism.expr.terms import Path, Term, parse

__all__ = [
    "BACKWARD", "FORWARD", "Analysis", "EGraph", "ENode", "Facts", "Path", "Pattern", "Rule",
    "RunReport", "Step", "Term", "TermFacts", "check_explanation", "fold_data", "parse",
]
