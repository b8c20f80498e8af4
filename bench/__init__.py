"""
Benchmarks of nfltr (not tests): each module is a program run with
C{python -m bench.NAME}; results and how they were obtained go to
C{docs/benchmarks.md}.
"""
