"""
Tests for L{nfltr.http}.
"""
