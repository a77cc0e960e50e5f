"""Review: what happens when a run completes (DESIGN.md, "Review").

Score the run with its role's review scorers, derive its flags (``hallucination_detected``,
``hallucination_reason``, failure modes), flag the content it produced
(``hallucination_suspected`` on every item of its ``links``), tell the host application
(:func:`on_flagged` callbacks, a signed webhook), and keep human verdicts beside the flags.

- :func:`review_pending` reviews what waits in a store (the store is the queue);
  :class:`Reviewer` does it in a background thread (capture's on-completion hook and the server
  use it).
- :func:`score_finished` scores runs that just finished and tallies them (the
  ``agentlens_eval`` fixture and ``agentlens demo`` use it).
- :func:`content_flags`, :func:`review_queue`, :func:`set_verdict`, :func:`precision` read and
  write the review state.

See docs/review.md.
"""

from agentlens.review._hooks import (
    FlaggedRun,
    ReviewStats,
    clear_flagged_callbacks,
    on_flagged,
    review_stats,
)
from agentlens.review._pipeline import ReviewResult, review_pending, review_pending_result
from agentlens.review._reviewer import Reviewer
from agentlens.review._settings import DEFAULT_REVIEW_SCORERS, ReviewSettings, review_settings
from agentlens.review._tally import ScoredRun, Tally, score_finished
from agentlens.review._verdicts import (
    Precision,
    content_flags,
    precision,
    review_queue,
    set_verdict,
)
from agentlens.review._webhook import (
    DELIVERY_HEADER,
    SIGNATURE_HEADER,
    deliver_all_due,
    deliver_due,
    sign,
    verify_signature,
)

__all__ = [
    "DEFAULT_REVIEW_SCORERS",
    "DELIVERY_HEADER",
    "SIGNATURE_HEADER",
    "FlaggedRun",
    "Precision",
    "ReviewResult",
    "ReviewSettings",
    "ReviewStats",
    "Reviewer",
    "ScoredRun",
    "Tally",
    "clear_flagged_callbacks",
    "content_flags",
    "deliver_all_due",
    "deliver_due",
    "on_flagged",
    "precision",
    "review_pending",
    "review_pending_result",
    "review_queue",
    "review_settings",
    "review_stats",
    "score_finished",
    "set_verdict",
    "sign",
    "verify_signature",
]
