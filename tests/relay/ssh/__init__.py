"""Tests of nfltr.relay.ssh, the relay's SSH front."""
