"""Data package: skiplock's templates, shipped inside the wheel (see skiplock.core.plumbing.resources)."""
