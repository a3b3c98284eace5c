"""Read-only views of the queue: Prometheus metrics, the doctor's checks, why a job is not running.

They only read, through the core. The worker's health endpoint, the console and the command line
share them.
"""
