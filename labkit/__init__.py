"""Throwaway lab pieces for benchmarks and tests: a redis-server on a port of its own,
device rows, tiny models, free ports. `bench/` imports these, never `tests/`."""
