"""Hashing ops of text models: LSH_PROJECTION, SKIP_GRAM, HASHTABLE_LOOKUP."""
