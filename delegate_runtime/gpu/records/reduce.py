"""SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD over constant axes."""
