"""Volumetric convolutions: CONV_3D and CONV_3D_TRANSPOSE."""
