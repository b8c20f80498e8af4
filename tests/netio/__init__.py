"""
Tests for L{nfltr.netio}.
"""
