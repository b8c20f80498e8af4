"""
Tests of the benchmark harness (C{bench/}): adapters, parsing, targets.
"""
