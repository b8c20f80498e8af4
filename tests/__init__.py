"""
nfltr's trial suite.

Hypothesis runs under one profile here: the machines that run this suite are small and shared, so
a draw or an example that takes long measures the machine, not the code. Timing checks
(per-example deadlines and the too-slow health check) are off; every other health check stays.
"""

from hypothesis import HealthCheck, settings

settings.register_profile("nfltr", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("nfltr")
