"""The soundness evidence of every axiom of the table: what z3 proves, and the random checks.

    .venv/bin/python bench/axiom_evidence.py [NAME ...] [--timeout-ms MS] [--json FILE]

One row per axiom: its evidence kind in the table, the status `prism.smt.prove_axiom` gives it
(proved / refuted / unknown / not_stated), its seconds, the generic instances it covers, and the
number of random float64 instances `prism.expr.evidence.random_evidence` checked (with its
failures, if any). Then the axioms whose table kind is `random` but that z3 proves, and every
axiom z3 does not prove, with the reason.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings

from prism.expr.axioms import AXIOMS
from prism.expr.evidence import random_evidence
from prism.smt import prove_axiom


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="axioms to report (default: all)")
    parser.add_argument("--timeout-ms", type=int, default=5000, help="per z3 query")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv[1:])
    warnings.simplefilter("ignore", RuntimeWarning)  # draws outside a domain give nan: checked
    chosen = [a for a in AXIOMS if not args.names or a.name in args.names]
    start = time.perf_counter()
    print(f"{'axiom':<28} {'table':>6} {'smt':>10} {'seconds':>7} {'smt inst':>8} "
          f"{'random inst':>11}")
    rows = []
    for ax in chosen:
        smt = prove_axiom(ax, timeout_ms=args.timeout_ms)
        rnd = random_evidence(ax)
        flag = f" (random: {len(rnd.failures)} FAILED)" if rnd.failures else ""
        print(f"{ax.name:<28} {ax.evidence:>6} {smt.status:>10} {smt.seconds:>7.2f} "
              f"{smt.instances:>8} {rnd.instances:>11}{flag}", flush=True)
        rows.append({"axiom": ax.name, "table": ax.evidence, "smt": smt.status,
                     "seconds": round(smt.seconds, 3), "smt_instances": smt.instances,
                     "detail": smt.detail, "model": smt.model, "random_instances": rnd.instances,
                     "random_failures": list(rnd.failures)})
    total = time.perf_counter() - start
    counts = {s: sum(r["smt"] == s for r in rows) for s in ("proved", "refuted", "unknown",
                                                            "not_stated")}
    print(f"\n{len(rows)} axioms in {total:.1f} s: " +
          ", ".join(f"{n} {s}" for s, n in counts.items()))
    promotable = [r["axiom"] for r in rows if r["table"] == "random" and r["smt"] == "proved"]
    print(f"\ntable kind random, proved by z3 ({len(promotable)}): {', '.join(promotable)}")
    for r in rows:
        if r["smt"] != "proved":
            print(f"\n{r['axiom']}: {r['smt']}: {r['detail']}")
            if r["model"]:
                print(f"  model: {r['model']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if counts["refuted"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
