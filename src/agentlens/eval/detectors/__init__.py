"""The built-in scorers, as factories: ``repeated_tool_calls(max_repeats=5)`` is the scorer with
that option bound; :mod:`agentlens.eval._registry` lists them by name.
"""

from agentlens.eval.detectors._grounding import no_fabricated_refs, parametric_leakage
from agentlens.eval.detectors._synthesis import faithful_synthesis, judged_leakage
from agentlens.eval.detectors._transcript import excessive_steps, no_progress, repeated_tool_calls

__all__ = [
    "excessive_steps",
    "faithful_synthesis",
    "judged_leakage",
    "no_fabricated_refs",
    "no_progress",
    "parametric_leakage",
    "repeated_tool_calls",
]
