"""
The Autobahn TestSuite (through kosoku) against nfltr's WebSocket transport.
"""
