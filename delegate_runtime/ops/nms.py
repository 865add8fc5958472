"""Non-max suppression: NON_MAX_SUPPRESSION_V4 and V5."""
