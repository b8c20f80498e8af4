"""
Tests for L{nfltr.relay.cluster}: several relays as one.
"""
