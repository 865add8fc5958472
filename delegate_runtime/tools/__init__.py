"""Measurement tools: benchmark, inference diff, task accuracy, op profile.

Their output follows TFLite's `benchmark_model` and evaluation tools (REFERENCE.md), so
people and parsers that know those recognise ours.
"""
