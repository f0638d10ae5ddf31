"""The run folder: what a run writes (trajectories, step logs), how it is read back and resumed.

The format is in ``docs/run-folder.md``.
"""
