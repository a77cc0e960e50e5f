"""Fixtures for the judge tests (the fakes live in ``llm_fakes``, which tests import by name)."""

from llm_fakes import fake_llm

__all__ = ["fake_llm"]
