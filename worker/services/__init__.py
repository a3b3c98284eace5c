"""The periodic services a worker runs on its scheduler: reaper, pruner, recurring jobs, history partitions.

Each exposes `run_once()` (or a tick); maintenance.py is the APScheduler instance that calls them on a
timer, so tests drive the same code directly. They use the core and never the worker's runtime.
"""
