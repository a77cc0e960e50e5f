"""The stored row a score gives, for the tests that compare it with a row made without it."""

from __future__ import annotations

from agentlens.model import Score, ScoreRow
from agentlens.model._trace import from_epoch_us


def row_made_as(score: Score, row: ScoreRow) -> ScoreRow:
    """``ScoreRow.of(score, keep=False)`` with ``score`` as if made when ``row`` was (its
    ``scored_at``, µs since the epoch): two rows of one run made apart differ only there."""
    when = from_epoch_us(row.scored_at or 0)
    return ScoreRow.of(score.model_copy(update={"scored_at": when}), keep=False)
