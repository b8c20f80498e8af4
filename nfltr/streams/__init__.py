# -*- test-case-name: tests.streams.test_windowed -*-
"""
Stream transports shared by nfltr's tunnels.
"""
