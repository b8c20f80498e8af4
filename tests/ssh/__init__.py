"""Tests of nfltr.ssh."""
