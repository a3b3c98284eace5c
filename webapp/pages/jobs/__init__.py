"""The job page's area, /jobs/<id>: the page and its actions (detail.py), a running job's Cancel
(cancel.py) and a dead job's "Edit and retry" (edit_retry.py, which shows the job page again when it
refuses an edit). Its modules may import one another; no other page imports them."""
