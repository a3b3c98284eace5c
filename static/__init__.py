"""Data package: skiplock's static, shipped inside the wheel (see skiplock.core.plumbing.resources)."""
