# The oracle cells' shared preamble: `conftest.oracle_source` puts this text before every
# notebook's oracle cell, which runs in the notebook's own kernel after its last cell. Names start
# with `_` so that they cannot clash with a notebook's own.


def _rejection(check, answer):
    """Why the exercise's check cell rejects `answer` (its assertion's message), or None when it
    accepts it. Any other exception propagates: a check that crashes does not reject."""
    try:
        check(answer)
    except AssertionError as e:
        return str(e)
    return None


def _rejects(check, answer):
    """Whether the exercise's check cell rejects `answer` (a wrong one, in every oracle)."""
    return _rejection(check, answer) is not None
