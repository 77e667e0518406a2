"""Evaluation: benchmarks (built-in world suites and external files), systems, metrics with uncertainty, reports."""
