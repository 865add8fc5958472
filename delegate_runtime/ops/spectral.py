"""Complex-valued ops of audio front ends: RFFT2D, REAL, IMAG, COMPLEX_ABS."""
