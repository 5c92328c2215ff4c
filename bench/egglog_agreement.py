"""Per corpus file: does egglog, compiling the same axiom table, decide as our e-graph does?

    .venv/bin/python bench/egglog_agreement.py [CORPUS_DIR]

For every graph of each Mirage μGraph file (and for the hand-fused kernels of `KNOWN_BEST`), the
target is its workload traced at the file's shapes. A pair agrees when both prove it, or neither
does (ours: not_equivalent or unknown; egglog: saturated or stopped at a limit). The columns:
pairs, agreements, ours-equivalent, egglog-equivalent, and the seconds each side took (ours
includes random testing where it has no proof). The pairs and the agreement rule are the tests'
(tests/expr/test_egglog_oracle.py); this script reuses them rather than keep a second copy.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "expr"))

from test_egglog_oracle import (  # noqa: E402  (the path above)
    CORPUS,
    Pair,
    agrees,
    corpus_pairs,
    egglog_decision,
    known_best_pairs,
)

from prism.verify.equiv import verify  # noqa: E402

DEFAULT_CORPUS = ROOT.parent / "shared/external/mirage_mugraphs"


def report(label: str, pairs: list[Pair]) -> dict[str, object]:
    ours_s = egglog_s = 0.0
    agreed = ours_eq = egglog_eq = 0
    for name, target, candidate in pairs:
        start = time.perf_counter()
        ours = verify(target, candidate).verdict
        middle = time.perf_counter()
        egglog = egglog_decision(target, candidate)
        ours_s, egglog_s = ours_s + middle - start, egglog_s + time.perf_counter() - middle
        agreed += agrees(ours, egglog)
        ours_eq += ours == "equivalent"
        egglog_eq += egglog is True
        if not agrees(ours, egglog):
            print(f"  {name}: ours {ours}, egglog {egglog}", file=sys.stderr)
    return {"file": label, "pairs": len(pairs), "agree": agreed, "ours_eq": ours_eq,
            "egglog_eq": egglog_eq, "ours_s": ours_s, "egglog_s": egglog_s}


def main(argv: list[str]) -> int:
    folder = Path(argv[1]) if len(argv) > 1 else DEFAULT_CORPUS
    print(f"{'file':<22} {'pairs':>5} {'agree':>5} {'ours-eq':>7} {'egglog-eq':>9} "
          f"{'ours s':>7} {'egglog s':>8}")
    rows = [("known_best", known_best_pairs)] + [
        (path.name, lambda path=path: corpus_pairs(path))
        for path in sorted(folder.glob("*.json")) if path.stem in CORPUS]
    for label, pairs in rows:
        r = report(label, pairs())
        print(f"{r['file']:<22} {r['pairs']:>5} {r['agree']:>5} {r['ours_eq']:>7} "
              f"{r['egglog_eq']:>9} {r['ours_s']:>7.1f} {r['egglog_s']:>8.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
