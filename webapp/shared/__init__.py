"""What the console's pages build on besides the request plumbing at webapp/'s top (auth, db, filters,
settings, web): charts and the DAG's layout, a job's timeline and links, the "Edit and retry" form, the
search filter, a workflow's cached shape, capped counts, chart ranges, run times and failure rates.
A shared module never imports a page."""
