"""The built-in deterministic detectors. Importing this package registers their scorers."""
