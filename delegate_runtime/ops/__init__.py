"""Reference kernels (numpy), grouped by op family; see `registry` for the op list."""
