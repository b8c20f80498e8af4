"""
Tests for L{nfltr.inspect}: the agent's request inspector.
"""
