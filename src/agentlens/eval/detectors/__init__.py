"""The built-in scorers. Importing this package registers them.

Each is also a factory that binds options, e.g. ``repeated_tool_calls(max_repeats=5)``.
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
