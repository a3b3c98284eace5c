"""The queue core's plumbing: how every process reaches PostgreSQL and reports on itself.

Configuration, connections and their deadlines, migrations, logs, tracing, the data files that travel in
the package, and the drivers of a caller's own connection. Nothing here knows a job's states beyond their
names, nor any feature (tests/unit/test_layers.py).
"""
