"""CUMSUM along a constant axis (exclusive and reverse forms)."""
