"""BATCH_MATMUL and ADD_N."""
