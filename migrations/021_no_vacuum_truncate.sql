-- 021: vacuums of the hot tables never truncate them (issue 19, the latency curve).
--
-- When a vacuum finds empty pages at the end of a table it cuts them off, holding an ACCESS
-- EXCLUSIVE lock on the table meanwhile; every claim, ack and enqueue waits behind it, and the
-- next inserts extend the table again. A queue empties and refills all the time, so jobs always
-- has such a tail: on a private cluster at 11,500 jobs/s an autovacuum of jobs removed 630 of its
-- 783 pages, claims took 15-30 ms for the next second instead of ~1 ms, and the backlog went from
-- a few hundred jobs to 11,142 (p99 0.35-2 s against ~80 ms without). queue_waiters, whose waiter
-- tokens every producer's insert trigger takes (migration 015), is emptied and refilled the same
-- way. The pages a truncation would return are reused by the next inserts anyway.
ALTER TABLE jobs SET (vacuum_truncate = false);
ALTER TABLE queue_waiters SET (vacuum_truncate = false);
