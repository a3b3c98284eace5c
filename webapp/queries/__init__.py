"""The console's read-only SQL: page_queries.py for most pages, search_queries.py for Search,
workflow_queries.py for workflows, batches and a job's links. Every action calls the queue core in
worker/; nothing here changes a job."""
