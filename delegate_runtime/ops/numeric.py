"""Numeric ops past plain arithmetic: rounding (FLOOR, CEIL, ROUND), SIGN, ATAN2, bitwise ops, BITCAST, RANK, BROADCAST_ARGS, FAKE_QUANT."""
