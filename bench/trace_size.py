"""What a trace file's bytes are (issue 20, item 6: `make run`'s trace ≤ 2 MB): the file as it
lies on disk (an output folder's `trace.jsonl.gz`, or a plain `.jsonl`), its plain text per
event type and per field (a payload's keys one level down), and that text gzip-compressed in
one go. With no file given it runs `make run`'s job first (the default workload, `--measure
model`) into a temporary folder and measures the trace it wrote.

    .venv/bin/python bench/trace_size.py [TRACE.jsonl[.gz]]
"""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

TOP = 12


def measure(path: Path) -> str:
    on_disk = path.stat().st_size
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":            # gzip, as `prism.trace` tells it
        raw = gzip.decompress(raw)
    by_type: Counter[str] = Counter()
    count: Counter[str] = Counter()
    by_field: Counter[str] = Counter()
    for line in raw.splitlines():
        event = json.loads(line)
        kind = event["type"]
        by_type[kind] += len(line) + 1
        count[kind] += 1
        for key, value in event.items():
            by_field[f"{kind}.{key}"] += len(json.dumps(value)) + len(key) + 4  # "key": and ", "
            if isinstance(value, dict):
                for sub, inner in value.items():
                    by_field[f"{kind}.{key}.{sub}"] += len(json.dumps(inner)) + len(sub) + 4
    total = len(raw)
    packed = len(gzip.compress(raw, 6))
    out = [f"{path}: {on_disk:,} bytes on disk; plain text {total:,} bytes, "
           f"{sum(count.values()):,} events; gzip -6 in one go: {packed:,} bytes",
           "", "| event | events | bytes | share |", "|---|---:|---:|---:|"]
    out += [f"| {k} | {count[k]:,} | {b:,} | {b / total:.1%} |" for k, b in by_type.most_common()]
    out += ["", "| field | bytes | share |", "|---|---:|---:|"]
    out += [f"| {k} | {b:,} | {b / total:.1%} |" for k, b in by_field.most_common(TOP)]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if argv:
        print(measure(Path(argv[0])))
        return 0
    from prism.cli import main as prism
    from prism.trace import TRACE_FILE
    with tempfile.TemporaryDirectory() as folder:
        code = prism(["optimize", "rmsnorm_matmul", "--measure", "model", "--out", folder])
        print(measure(Path(folder) / TRACE_FILE))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
