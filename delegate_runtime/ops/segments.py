"""Segment reductions: SEGMENT_SUM and the UNSORTED_SEGMENT_* family."""
