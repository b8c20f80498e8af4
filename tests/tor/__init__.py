"""Tests of nfltr.tor."""
