"""`skiplock.producer_async`, the public path of `close_default_async_pool` (docs/reference/api.md): a re-export.

The asyncio producer lives in the queue core, worker/core/producer_async.py; `skiplock.enqueue_async` and
`skiplock.enqueue_many_async` are exported by `skiplock` itself.
"""

from skiplock.core.producer_async import close_default_async_pool, enqueue_async, enqueue_many_async

__all__ = ["close_default_async_pool", "enqueue_async", "enqueue_many_async"]
