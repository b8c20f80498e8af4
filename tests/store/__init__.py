"""
Tests for L{nfltr.store}.
"""
