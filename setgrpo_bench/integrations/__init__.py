"""Bridges to other training libraries (optional extras, imported on use)."""
