"""The queue core: the jobs table's states, its statements and transitions, and what every process needs.

queries.py holds the statements that read and change jobs; core.py is one function per transition.
Beside them: configuration, connections, migrations, the producer and the task registry. Every other
layer (monitor, services, runtime, the console, the tools) calls these; none writes job SQL of its own.
"""
