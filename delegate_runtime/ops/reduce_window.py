"""REDUCE_WINDOW: a reduction over sliding windows (StableHLO's reduce_window as a TFLite builtin)."""
