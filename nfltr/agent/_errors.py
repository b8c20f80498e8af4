# -*- test-case-name: tests.agent.test_settings -*-
"""
The error every part of the agent's configuration raises.
"""


class ConfigError(ValueError):
    """
    A setting is missing or wrong; the message says what to do about it.
    """
