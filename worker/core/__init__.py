"""The queue core: the jobs table's states, its statements and transitions, and what every process needs.

The folder tells its parts apart. Here, the queue itself: status.py (the states), sql/ (the
statements that read and change jobs, named in .sql files), state_changes.py (one function per transition),
the producer, the task table and @task. Beside it, plumbing/ (config, connections, migrations, logs,
tracing), features/ (one feature each) and workflows/. Every other layer (monitor, services, runtime, the
console, the tools) calls these; none writes job SQL of its own.
"""
