"""Families carry their sGraph on the trace only when asked (`SearchConfig.record_graphs`). The
oracle is the same search traced both ways: apart from the families' graphs, the two traces hold
the same events (the search's shortcuts for unrecorded graphs decide as the full path does), and
each pruned family's recorded graph is a graph document of its own, apart from its parent's."""

from dataclasses import replace

from prism.ir.serialize import FORMAT
from prism.search import search
from prism.trace import JsonlWriter, Tracer, event_to_json, read_jsonl


def traced(cases, tmp_path, record_graphs: bool):
    config = replace(cases.reduced("rmsnorm_matmul"), record_graphs=record_graphs)
    path = tmp_path / f"graphs-{record_graphs}.jsonl"
    tracer = Tracer(keep=False)
    with JsonlWriter(path) as writer:
        tracer.subscribe(writer, required=True)
        search(cases.small("rmsnorm_matmul").graph, config, tracer=tracer,
               label="rmsnorm_matmul")
    return path, read_jsonl(path)


def decisions(events):
    """The events less the families' graphs and what the clock decides."""
    out = []
    for e in events:
        if e.type in ("StageFinished", "SearchFinished"):    # seconds
            continue
        doc = event_to_json(e)
        for key in ("seq", "time", "graph" if e.type == "FamilyGenerated" else ""):
            doc.pop(key, None)
        if isinstance(doc.get("proof"), dict):                 # the proof's own clock readings
            for key in ("seconds", "report", "egraph"):
                doc["proof"].pop(key, None)
        out.append(doc)
    return out


def test_pruned_families_carry_their_graph_only_when_asked(cases, tmp_path):
    plain_path, plain = traced(cases, tmp_path, record_graphs=False)
    full_path, full = traced(cases, tmp_path, record_graphs=True)
    assert decisions(plain) == decisions(full)
    families = [e for e in plain if e.type == "FamilyGenerated"]
    pruned = {e.id for e in plain if e.type == "FamilyPruned"}
    assert pruned and all(e.graph is None for e in families)
    assert '"graph"' not in "".join(line for line in plain_path.read_text().splitlines()
                                    if '"FamilyGenerated"' in line)
    generated = {e.id: e for e in full if e.type == "FamilyGenerated"}
    for fid in pruned:      # a partial sGraph (no output yet: it does not pass `check`)
        graph, parent = generated[fid].graph, generated[fid].parent
        assert graph is not None and graph["format"] == FORMAT
        assert parent is None or graph != generated[parent].graph
    assert plain_path.stat().st_size * 5 < full_path.stat().st_size


def test_the_command_line_asks_for_graphs_with_trace_graphs(tmp_path, capsys):
    from prism.cli import main
    caps = ["--max-block-ops", "4", "--grid-dims", "1", "--block-ops", "matmul,silu,mul",
            "--accumulators", "nored", "--max-families", "40"]
    for flag, path in (([], tmp_path / "plain.jsonl"), (["--trace-graphs"], tmp_path / "g.jsonl")):
        assert main(["search", "swiglu", *caps, *flag, "--trace", str(path), "--json"]) in (0, 1)
        capsys.readouterr()
    plain = [e for e in read_jsonl(tmp_path / "plain.jsonl") if e.type == "FamilyGenerated"]
    graphs = [e for e in read_jsonl(tmp_path / "g.jsonl") if e.type == "FamilyGenerated"]
    assert plain and all(e.graph is None for e in plain)
    assert [e.id for e in graphs] == [e.id for e in plain]
    assert all(e.graph is not None and e.graph["format"] == FORMAT for e in graphs)
