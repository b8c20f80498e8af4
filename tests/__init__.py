"""
nfltr's trial suite.

Hypothesis runs under one profile here: the machines that run this suite are small and shared, so
a draw or an example that takes long measures the machine, not the code. Timing checks
(per-example deadlines and the too-slow health check) are off.  Behaviour tests are written once
and run per path, transport or holder kind (a test case's copy per kind, as in
tests.http.test_stream), so one property runs on several test classes: the health check against
"differing executors" is off too, as replaying one kind's saved examples on another only adds
examples.  Every other health check stays.
"""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "nfltr", deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors],
)
settings.load_profile("nfltr")
