# -*- test-case-name: tests.cli.test_main -*-
"""
C{python -m nfltr}: the same as the C{nfltr} command.
"""

from nfltr.cli import main

raise SystemExit(main())
