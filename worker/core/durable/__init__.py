"""Durable jobs: steps, cursors, sleeps and waits of a run, and the signals that wake them.

The design is docs/explanation/durable-jobs.md. `run` holds one run's stored state (read lazily, on its
first durable call), `cursors` the cursors saved in memory until the worker writes them, `signals` the
producer's side (skiplock.signal), `service` the wake pass and the repairs the worker's services call.
"""
