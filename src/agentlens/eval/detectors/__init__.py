"""The built-in deterministic detectors. Importing this package registers their scorers."""

from agentlens.eval.detectors import (
    _grounding,  # noqa: F401  (registers the grounding checks)
    _synthesis,  # noqa: F401  (registers faithful_synthesis)
    _transcript,  # noqa: F401  (registers the transcript analysers)
)
