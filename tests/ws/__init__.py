"""Tests for nfltr.ws."""
