# -*- test-case-name: tests.test_cli -*-
"""
C{python -m nfltr}: the same as the C{nfltr} command.
"""

from nfltr.cli import main

raise SystemExit(main())
