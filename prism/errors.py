"""Every error a user can cause is a `PrismError` whose message names the problem and the fix.

Messages are one line: what is wrong, then what to do about it. The CLI prints them as they are
(no traceback); `--json` commands print them as `{"error": {"type", "message"}}`.
"""

from __future__ import annotations


class PrismError(Exception):
    """Base of every error the engine raises on purpose."""


class UnsupportedOpError(PrismError):
    """A traced program uses an operator the IR has no entry for."""


class ShapeError(PrismError):
    """Shapes that do not fit: a mismatch, rank > 4, or a dimension ≤ 0."""


class UnknownWorkloadError(PrismError):
    """A workload name that is not in the registry."""


class UnknownDeviceError(PrismError):
    """A device name the cost model has no specification for; the message names the known ones."""


class GraphFormatError(PrismError):
    """A graph file (ours) that is not valid JSON or not a valid graph document."""


class MirageFormatError(GraphFormatError):
    """A Mirage μGraph file that cannot be read: bad JSON, a missing field, an unknown op."""


class TraceFormatError(PrismError):
    """A JSONL trace file with a line that is not a known event."""


class DimExprError(PrismError):
    """A dimension expression that cannot be evaluated (unbound variable, division by zero)."""


class SpecError(PrismError):
    """A graph that is not well-formed; `problems` lists every violation found."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        head = self.problems[0] if self.problems else "graph is not well-formed"
        more = f" (and {len(self.problems) - 1} more problem(s))" if len(self.problems) > 1 else ""
        super().__init__(f"graph is not well-formed: {head}{more}")


class InputError(PrismError):
    """Arrays handed to `interpret` (or a kernel) that do not match the graph's inputs."""


class TermSyntaxError(PrismError):
    """An s-expression (term or rule pattern) that cannot be read: unbalanced parens, an empty list,
    a list whose head is not an atom, a pattern variable applied to arguments."""


class RuleError(PrismError):
    """A rewrite rule that cannot be used: a variable on one side the other side does not bind,
    two rules with one name, or a condition that asks about something it cannot know."""


class NotEquivalentError(PrismError):
    """An explanation asked for two terms that the e-graph has not proved equal."""


class ProofCheckError(PrismError):
    """A flat explanation that does not replay: the message names the step and what failed."""


class VerifyError(PrismError):
    """Two graphs that cannot be compared (different inputs or outputs), or a graph the chosen
    verification method cannot run."""


class ListenerError(PrismError):
    """A listener the run cannot do without (subscribed with `required=True`, such as the trace
    file) failed: the run's record would be incomplete, so the run stops and says why."""


class TraceWriteError(ListenerError):
    """A trace file that cannot be opened or written (a full disk, a folder that is not
    writable); the message names the file and the operating system's reason."""


class UsageError(PrismError):
    """A command line that cannot be used: an unknown option, a missing argument, or a value out
    of range (a count that is not a positive integer, a time that is not a positive finite
    number)."""


class ArgumentTypeError(PrismError, TypeError):
    """A Python API argument of the wrong type (`budget_s="10"`, `search_config={}`,
    `db="path"`); the message names the argument, what it got and what to pass instead."""


class OutputPathError(PrismError):
    """An output path that cannot be written, found before any work: a file where a folder is
    needed (or a folder where a file is), a folder that is not writable, a parent that cannot be
    made."""


class OutputLockedError(OutputPathError):
    """An output folder another running prism process is writing into (its lock file names the
    process)."""


class ResultDBError(PrismError):
    """A result database that cannot be read or written (a folder in its place, no permission),
    found before the search starts."""


class TooLargeError(ShapeError):
    """Shapes whose tensors would not fit in this machine's memory when the verifier's random
    tests or the final check allocate them; the message gives the size."""


class DtypeError(PrismError):
    """A dtype Prism does not run programs in (float64, integers: it runs float16, bfloat16 and
    float32), or a module whose floating tensors do not share one dtype."""


class UserModuleError(PrismError):
    """A user's `path.py` that raised, or called `sys.exit`, while being imported."""
