"""The queue core's features, one each: global limits, payload versions, idle workers' waiting and hand-off,
snooze, cancel, attempts' errors, error hooks, progress, run times, the audit trail, worker controls.

Each calls the queue's statements and transitions (core/statements.py, core/state_changes.py); the queue
calls some of them back (the ack writes attempts and snoozes), so they share the core layer.
"""
