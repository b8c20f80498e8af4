"""
Tests for L{nfltr.relay.api}: the relay's API and dashboard.
"""
