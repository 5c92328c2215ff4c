"""Per-file report on the Mirage μGraph corpus: how many graphs import, pass `spec.check`, and
how far `interpret` is from the workload's float64 reference.

    .venv/bin/python bench/corpus_report.py [CORPUS_DIR]

The workload references are the tests' oracle (tests/frontend/test_mirage.py); this script reuses
them rather than keep a second copy. A graph that fails to import or check is counted, its error
printed, and the report goes on.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "frontend"))

from test_mirage import WORKLOADS, max_relative_error  # noqa: E402  (the path above)

from prism.errors import PrismError  # noqa: E402
from prism.frontend.mirage import import_mirage  # noqa: E402
from prism.ir import KernelGraph, check  # noqa: E402

DEFAULT_CORPUS = ROOT.parent / "shared/external/mirage_mugraphs"


def report_file(path: Path) -> dict[str, object]:
    start = time.perf_counter()
    doc = json.loads(path.read_text())
    imported: list[KernelGraph] = []
    checked: list[KernelGraph] = []
    for i, graph in enumerate(doc):
        try:
            (g,) = import_mirage([graph])
            imported.append(g)
            check(g)
            checked.append(g)
        except PrismError as e:
            print(f"  {path.name}[{i}]: {e}", file=sys.stderr)
    error = max_relative_error(path.stem, checked) if path.stem in WORKLOADS else float("nan")
    return {"file": path.name, "graphs": len(doc), "imported": len(imported),
            "spec_ok": len(checked), "max_rel_error": error,
            "seconds": time.perf_counter() - start}


def main(argv: list[str]) -> int:
    folder = Path(argv[1]) if len(argv) > 1 else DEFAULT_CORPUS
    print(f"{'file':<22} {'graphs':>6} {'imported':>8} {'spec-ok':>7} {'max rel err':>11} "
          f"{'seconds':>7}")
    for path in sorted(folder.glob("*.json")):
        r = report_file(path)
        print(f"{r['file']:<22} {r['graphs']:>6} {r['imported']:>8} {r['spec_ok']:>7} "
              f"{r['max_rel_error']:>11.2e} {r['seconds']:>7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
