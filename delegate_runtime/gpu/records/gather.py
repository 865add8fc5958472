"""GATHER (1-D int32 indices) and ONE_HOT."""
