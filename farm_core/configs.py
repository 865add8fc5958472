"""Run configurations: which delegate and precision a job uses, and where each applies."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunConfig:
    """A named configuration: `cpu`, `gpu-fp32` or `gpu-fp16`."""

    name: str
    delegate: str  #: "cpu" or "gpu"
    precision: str  #: "fp32" or "fp16"

    @property
    def use_gpu(self) -> bool:
        return self.delegate == "gpu"


CONFIGS: dict[str, RunConfig] = {
    c.name: c
    for c in (
        RunConfig("cpu", "cpu", "fp32"),
        RunConfig("gpu-fp32", "gpu", "fp32"),
        RunConfig("gpu-fp16", "gpu", "fp16"),
    )
}
DEFAULT_CONFIGS = ("cpu", "gpu-fp32", "gpu-fp16")

#: Device kind -> the configurations its runner can run. A desktop OpenCL device runs the
#: GPU configurations; the host CPU reference runs `cpu`; a phone runs all three.
KIND_CONFIGS: dict[str, tuple[str, ...]] = {
    "cpu": ("cpu",),
    "opencl": ("gpu-fp32", "gpu-fp16"),
    "android": DEFAULT_CONFIGS,
    "noop": DEFAULT_CONFIGS,
}


def parse_configs(text: str | list[str] | tuple[str, ...]) -> tuple[list[RunConfig], list[str]]:
    """The configurations named in `text` ("cpu,gpu-fp16"), and every error found."""
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text)]
    names = [n for n in names if n]
    errors, configs, seen = [], [], set()
    if not names:
        errors.append(f"no configuration given (choose from: {', '.join(CONFIGS)})")
    for n in names:
        if n in seen:
            errors.append(f"configuration {n!r} is given twice")
        elif n not in CONFIGS:
            errors.append(f"unknown configuration {n!r} (choose from: {', '.join(CONFIGS)})")
        else:
            configs.append(CONFIGS[n])
        seen.add(n)
    return configs, errors


def supports(kind: str, config: str) -> tuple[bool, str]:
    """Whether a device of `kind` can run `config`, with the reason when it cannot."""
    allowed = KIND_CONFIGS.get(kind)
    if allowed is None:
        return False, f"no runner for device kind {kind!r}"
    if config not in allowed:
        return False, f"{kind} devices run {', '.join(allowed)}, not {config}"
    return True, ""
