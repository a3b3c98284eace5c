"""The worker process: the claim loop, the handler pool and event loop, acks, heartbeat, listener.

runner.py's Worker wires it together, with the services below it; health.py is its liveness endpoint.
"""
