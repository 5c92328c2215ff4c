"""Fixtures shared by the tests."""

from __future__ import annotations

from pathlib import Path

import pytest

# The external Mirage μGraph corpus lives in the shared folder beside the repository.
MIRAGE_CORPUS = Path(__file__).resolve().parents[1].parent / "shared/external/mirage_mugraphs"


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """The Mirage μGraph corpus folder; skips the test when it is not there."""
    if not MIRAGE_CORPUS.is_dir():
        pytest.skip(f"Mirage μGraph corpus not found at {MIRAGE_CORPUS} "
                    "(shared/external/mirage_mugraphs beside the repository)")
    return MIRAGE_CORPUS
