"""`make bench` (`python -m bench`): memframe's figures beside their floors, measured in one run.

Each figure is printed with the floor or peer it is judged against, measured
in the same run, so a shared, noisy machine shows in both and the ratio holds.
The table is also written to `bench/results.md` and `bench/results.json`.
"""
