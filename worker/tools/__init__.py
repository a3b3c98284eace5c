"""The operator's tools at the edge: the `skiplock` command and its sub-commands, dev mode, the benchmark.

Nothing below imports them; the console does not either (its `skiplock web` command lives here).
"""
