"""The built-in deterministic detectors. Importing this package registers their scorers."""

from agentlens.eval.detectors import _transcript  # noqa: F401  (registers the transcript analysers)
