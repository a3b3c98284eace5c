-- recurring_schedules and recurring_slots (migrations 004, 037): the scheduler's reads, and schedules made at
-- runtime (skiplock.schedules, `skiplock schedules`, the console). The start-up sync of code definitions and
-- the slot planning itself are in worker/services/recurring_store.py.

-- name: due_schedules
-- The definitions the scheduler must plan at %(now)s, oldest first, at most %(limit)s: a range of
-- recurring_schedules_plan_idx. A pass that leaves some for the next one is still on time: each pending
-- slot is already enqueued, and the next one is planned well before it fires.
SELECT name, queue, next_fire_at
  FROM recurring_schedules
 WHERE enabled AND active AND coalesce(plan_at, '-infinity'::timestamptz) <= %(now)s
 ORDER BY coalesce(plan_at, '-infinity'::timestamptz)
 LIMIT %(limit)s

-- name: lock_due_many
-- Lock a batch of the due definitions for planning, in one statement; rows another worker holds are skipped
-- (it is planning them), and so are those paused or deactivated since they were read.
SELECT name, queue, kind, schedule, timezone, payload, catch_up, tenant, last_fire_at, next_fire_at
  FROM recurring_schedules
 WHERE name = ANY(%(names)s::text[]) AND enabled AND active
 ORDER BY name
   FOR UPDATE SKIP LOCKED

-- name: insert_slots
-- A batch's slots, the durable "this slot was enqueued" records, in one statement; the primary key (name,
-- fire_at) makes a slot another worker or an earlier pass recorded a no-op. The rows back are the new slots.
INSERT INTO recurring_slots (name, fire_at)
SELECT name, fire_at FROM unnest(%(names)s::text[], %(fire_ats)s::timestamptz[]) AS v(name, fire_at)
ON CONFLICT (name, fire_at) DO NOTHING
RETURNING name, fire_at

-- name: link_slot_jobs
-- Each new slot's job id, found by the slot's unique key among the in-flight jobs (jobs_unique_inflight).
UPDATE recurring_slots s
   SET job_id = j.id
  FROM unnest(%(names)s::text[], %(fire_ats)s::timestamptz[], %(keys)s::text[]) AS v(name, fire_at, key)
  JOIN jobs j ON j.unique_key = v.key AND j.status IN ('queued', 'running', 'parked')
 WHERE s.name = v.name AND s.fire_at = v.fire_at

-- name: set_fire_times_many
-- After planning a batch: each definition's newest slot that came due, its pending one, and when to plan next.
UPDATE recurring_schedules r
   SET last_fire_at = v.last, next_fire_at = v.next, plan_at = v.plan_at, updated_at = now()
  FROM unnest(%(names)s::text[], %(lasts)s::timestamptz[], %(nexts)s::timestamptz[], %(plan_ats)s::timestamptz[])
       AS v(name, last, next, plan_at)
 WHERE r.name = v.name

-- name: soonest_fire
-- The soonest pending slot after %(now)s on the given queues: when to wake this worker's claim loop.
SELECT next_fire_at
  FROM recurring_schedules
 WHERE enabled AND active AND next_fire_at > %(now)s AND queue = ANY(%(queues)s::text[])
 ORDER BY next_fire_at
 LIMIT 1

-- name: soonest_plan
-- The soonest moment after %(now)s at which a definition becomes due: when to run the next pass on time.
SELECT plan_at
  FROM recurring_schedules
 WHERE enabled AND active AND coalesce(plan_at, '-infinity'::timestamptz) > %(now)s
 ORDER BY coalesce(plan_at, '-infinity'::timestamptz)
 LIMIT 1

-- name: create_schedule
-- A new runtime schedule, nothing planned yet; no row back when the name is taken (by any schedule).
INSERT INTO recurring_schedules (name, queue, kind, schedule, timezone, payload, catch_up, tenant, origin)
VALUES (%(name)s, %(queue)s, %(kind)s, %(schedule)s, %(timezone)s, %(payload)s, %(catch_up)s, %(tenant)s, 'runtime')
ON CONFLICT (name) DO NOTHING
RETURNING name

-- name: lock_schedule
-- One schedule for a change, locked until the change commits (the scheduler skips it meanwhile).
SELECT name, queue, kind, schedule, timezone, payload, catch_up, tenant, origin, enabled, active,
       last_fire_at, next_fire_at
  FROM recurring_schedules
 WHERE name = %(name)s
   FOR UPDATE

-- name: update_schedule
-- A runtime schedule's new settings; planned again from now, like a changed code definition.
UPDATE recurring_schedules
   SET queue = %(queue)s, kind = %(kind)s, schedule = %(schedule)s, timezone = %(timezone)s,
       payload = %(payload)s, catch_up = %(catch_up)s, tenant = %(tenant)s, next_fire_at = NULL, plan_at = NULL,
       updated_at = now()
 WHERE name = %(name)s AND origin = 'runtime'

-- name: delete_schedule
-- A runtime schedule and (ON DELETE CASCADE) its slot records.
DELETE FROM recurring_schedules WHERE name = %(name)s AND origin = 'runtime' RETURNING name

-- name: get_schedule
-- One schedule as the API and the console show it.
SELECT name, queue, kind, schedule, timezone, payload, tenant, origin, enabled, active, catch_up,
       last_fire_at, next_fire_at, updated_at
  FROM recurring_schedules
 WHERE name = %(name)s

-- name: list_schedules_page
-- Schedules by name, optionally of one queue and one origin, a page at a time (after %(after)s).
SELECT name, queue, kind, schedule, timezone, payload, tenant, origin, enabled, active, catch_up,
       last_fire_at, next_fire_at, updated_at
  FROM recurring_schedules
 WHERE name > %(after)s
   AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
   AND (%(origin)s::text IS NULL OR origin = %(origin)s::text)
 ORDER BY name
 LIMIT %(limit)s
