"""The worker process: the claim loop, the handler pool and event loop, acks, heartbeat, listener.

runner.py's Worker wires its parts together: claimer.py (claims, NOTIFY, hand-offs), executor.py
(handlers and their outcomes), shutdown.py (the grace and the release), with the services below
it; health.py is its liveness endpoint.
"""
