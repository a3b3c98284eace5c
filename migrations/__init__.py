"""Data package: skiplock's migrations, shipped inside the wheel (see skiplock.core.resources)."""
