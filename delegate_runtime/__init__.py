"""devicefarm's TFLite-style runtime: read, validate, build and run `.tflite` models."""

from .errors import DeviceError, DevicefarmError, JobError, ModelError
from .graph import Model, Operator, Quantization, Signature, Subgraph, Tensor
from .reader import Limits, load_model, read_model

__all__ = [
    "DeviceError",
    "DevicefarmError",
    "JobError",
    "Limits",
    "Model",
    "ModelError",
    "Operator",
    "Quantization",
    "Signature",
    "Subgraph",
    "Tensor",
    "load_model",
    "read_model",
]
