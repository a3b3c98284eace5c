"""Workflows: jobs linked at enqueue (dependencies, batches), their results, and the operator's and the
sweeper's work on a whole workflow (docs/howto/workflows.md)."""
