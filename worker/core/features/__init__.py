"""The queue core's features, one each: global limits, payload versions, idle workers' waiting and hand-off,
cancel, error hooks, progress, run times, the audit trail, worker controls, an operator's payload edit.

Each sits above the queue: it calls the queue's statements and transitions (core/sql/,
core/state_changes.py), and nothing of the queue calls it back. What the ack itself writes (a failure's
attempt history, a snooze) is the ack's, in state_changes.py; the error's headline and group, which the
ack stores, is core/error_summary.py, below both (tests/unit/test_layers.py keeps the order).
"""
