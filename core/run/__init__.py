"""The run directory and the processes, MindSpore-free: the records and files of a run, atomic writes,
checkpoint folders, the launcher and its backends (local, Slurm), the rank supervisor, the trackers.
Imports core.spec only.
"""
