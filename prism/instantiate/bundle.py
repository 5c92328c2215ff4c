"""One `kernel.py` for several shapes: the generated modules of one program at each of its shapes,
merged, with a `run(*inputs)` that dispatches on the inputs' shapes.

    source = bundle([source_at_8, source_at_16])      # each: `generate(...).source`
    load(source).run(X, W)                            # the module of X's and W's shapes

Each generated module (`prism.instantiate.codegen`) holds the same runtime helpers (`_alloc`,
`_prepare`, ...) and, per shape, its own kernels (sizes are constants in them), `_INPUTS` and
`run`. The bundle keeps a top-level definition once where every module's is the same text, and
renames the others with the shape's suffix (`run` → `run_s0`, `kernel0_t2` → `kernel0_t2_s0`),
renaming only whole identifiers that are not attribute names; strings and comments are kept as
they are. `run(*inputs)` takes the inputs of the first module whose `_INPUTS` shapes match the
tensors passed (an optional input left out, such as a causal mask the module makes, matches), and
otherwise says which shapes the module carries.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Sequence

from prism.errors import PrismError


class BundleError(PrismError):
    """Modules that cannot be bundled into one (not generated ones, or of other programs)."""


_DISPATCH = '''

# per shape: the shapes run() takes, and that shape's launcher
_SHAPES = (
{entries}
)


def run(*inputs):
    """Dispatch on the inputs' shapes to the launcher generated for them (see _SHAPES)."""
    got = tuple(tuple(t.shape) if isinstance(t, torch.Tensor) else None for t in inputs)
    for shapes, launcher in _SHAPES:
        if len(got) <= len(shapes) and all(g == s for g, s in zip(got, shapes)):
            return launcher(*inputs)
    carried = "; ".join(" ".join(map(str, shapes)) for shapes, _ in _SHAPES)
    raise ValueError(f"inputs of shapes {{' '.join(map(str, got))}}: this module carries the "
                     f"shapes {{carried}}; optimize again with --also-at for these")
'''


def bundle(sources: Sequence[str]) -> str:
    """One module carrying every source's shapes (`sources`: generated modules of one program,
    at distinct shapes), dispatching on the input shapes."""
    if not sources:
        raise BundleError("no module to bundle: give at least one generated kernel module")
    if len(sources) == 1:
        return sources[0]
    parsed = [_parse(s, i) for i, s in enumerate(sources)]
    names = [list(p) for p in parsed]
    if any(set(n) != set(names[0]) for n in names):
        raise BundleError("the modules define different names: bundle modules generated from "
                          "one program (one checkpoint's candidates at several shapes)")
    shapes = [_input_shapes(sources[i], parsed[i]) for i in range(len(sources))]
    if len(set(shapes)) != len(shapes):
        raise BundleError("two modules take the same input shapes: bundle one module per shape")
    shared = [n for n in names[0] if all(p[n] == parsed[0][n] for p in parsed)]
    renamed = [n for n in names[0] if n not in shared]
    header, imports = _header(sources[0])
    out = [header.rstrip() + "\n\nSeveral shapes: run(*inputs) dispatches on the inputs' "
           "shapes (_SHAPES).\n\"\"\"\n" if header else "", imports.rstrip() + "\n"]
    out += ["\n\n" + parsed[0][n] for n in shared]
    for i, p in enumerate(parsed):
        out.append(f"\n\n# ---- shapes {i}: {' '.join(map(str, shapes[i]))}")
        out += ["\n\n" + _rename(p[n], {r: f"{r}_s{i}" for r in renamed}) for n in renamed]
    entries = "\n".join(f"    ({shape!r}, run_s{i})," for i, shape in enumerate(shapes))
    out.append(_DISPATCH.format(entries=entries))
    source = "".join(out)
    ast.parse(source)            # what we write parses
    return source


def _parse(source: str, index: int) -> dict[str, str]:
    """The module's top-level definitions (name → its text, decorators included), in order;
    imports and the docstring left out."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise BundleError(f"module {index} does not parse ({e.msg}, line {e.lineno})") from None
    lines = source.splitlines(keepends=True)
    defs: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue                                   # the docstring
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            name = node.name
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            name, first = node.targets[0].id, node.lineno
        else:
            raise BundleError(f"module {index} has a top-level statement at line {node.lineno} "
                              "that is not a definition: not a generated kernel module")
        assert node.end_lineno is not None
        defs[name] = "".join(lines[first - 1:node.end_lineno]).rstrip() + "\n"
    if "run" not in defs or "_INPUTS" not in defs:
        raise BundleError(f"module {index} has no run() or _INPUTS: not a generated kernel "
                          "module")
    return defs


def _input_shapes(source: str, defs: dict[str, str]) -> tuple[tuple[int, ...], ...]:
    spec = ast.literal_eval(ast.parse(defs["_INPUTS"]).body[0].value)  # type: ignore[attr-defined]
    return tuple(tuple(shape) for _, shape, _ in spec)


def _header(source: str) -> tuple[str, str]:
    """The module's docstring (without its closing quotes) and its import lines."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    header = ""
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        assert first.end_lineno is not None
        text = "".join(lines[:first.end_lineno]).rstrip()
        header = text[:-3] if text.endswith('"""') else text
    imports = "".join("".join(lines[n.lineno - 1:n.end_lineno or n.lineno]) for n in tree.body
                      if isinstance(n, ast.Import | ast.ImportFrom))
    return header, "\n" + imports


def _rename(text: str, names: dict[str, str]) -> str:
    """`text` with each whole identifier in `names` renamed, except after a dot (an attribute)."""
    out, previous = [], None
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.NAME and tok.string in names and \
                not (previous is not None and previous.string == "."):
            tok = tok._replace(string=names[tok.string])
        out.append(tok)
        if tok.type not in (tokenize.NL, tokenize.COMMENT):
            previous = tok
    return tokenize.untokenize(out)
