"""Run configurations: a delegate and its options, named by one canonical string.

A configuration is written `delegate[:option=value;option=value]` (farm_core.delegates
lists both), or by a preset name: `cpu`, `gpu-fp32` and `gpu-fp16` are the stored names of
`cpu`, `gpu` and `gpu:precision=fp16`, and stay so (results in databases use them). Every
form is normalised (options sorted, defaults dropped, presets by their name) so that
results, comparisons and regressions key on the full configuration. `--configs` is split
on commas, so a configuration's options are split on `;`:

    cpu,gpu-fp16,nnapi:accelerator=google-edgetpu;fp16=true,hexagon,gpu:backend=gl
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .delegates import DELEGATES, describe

#: Most characters of a canonical configuration (jobs.config and results.config hold it).
CONFIG_CHARS = 128
OPTION_SEPARATOR = ";"


@dataclass(frozen=True)
class RunConfig:
    """A configuration: its canonical `name`, its delegate and the options that differ
    from the delegate's defaults (sorted)."""

    name: str
    delegate: str  #: a key of farm_core.delegates.DELEGATES
    options: tuple[tuple[str, str], ...] = ()

    def option(self, name: str) -> str | None:
        """An option's value, the delegate's default when it is not given."""
        given = dict(self.options)
        if name in given:
            return given[name]
        spec = DELEGATES[self.delegate].option(name)
        return spec.default if spec else None

    @property
    def use_gpu(self) -> bool:
        return self.delegate == "gpu"

    @property
    def delegated(self) -> bool:
        """Whether a delegate other than the interpreter's CPU kernels runs the model."""
        return self.delegate != "cpu"

    @property
    def precision(self) -> str:
        """fp16 when the delegate may compute in half precision, else fp32."""
        fp16 = self.option("precision") == "fp16" or self.option("fp16") == "true"
        return "fp16" if fp16 else "fp32"


def _canonical(delegate: str, options: dict[str, str]) -> str:
    spec = DELEGATES[delegate]
    kept = sorted((k, v) for k, v in options.items() if spec.option(k).default != v)
    text = delegate + (":" + OPTION_SEPARATOR.join(f"{k}={v}" for k, v in kept) if kept else "")
    return PRESET_OF.get(text, text)


#: Preset name -> its canonical explicit form.
PRESETS: dict[str, str] = {"cpu": "cpu", "gpu-fp32": "gpu", "gpu-fp16": "gpu:precision=fp16"}
PRESET_OF: dict[str, str] = {v: k for k, v in PRESETS.items()}


def parse_config(text: str) -> tuple[RunConfig | None, list[str]]:
    """One configuration from a preset name or `delegate:option=value;...`, and every
    error found (each naming the choices)."""
    t = text.strip()
    if t in PRESETS:
        t = PRESETS[t]
    head, colon, rest = t.partition(":")
    delegate = head.strip().lower()
    if delegate not in DELEGATES:
        return None, [
            f"unknown configuration {text!r}: presets are {', '.join(PRESETS)}; delegates "
            f"are {describe()}"
        ]
    spec = DELEGATES[delegate]
    options: dict[str, str] = {}
    errors = []
    for item in (p for p in rest.split(OPTION_SEPARATOR) if p.strip()) if rest else ():
        key, eq, value = item.partition("=")
        key = key.strip().lower()
        opt = spec.option(key)
        if opt is None:
            names = ", ".join(o.name for o in spec.options) or "none"
            errors.append(f"{text!r}: {delegate} has no option {key!r} (options: {names})")
        elif not eq:
            errors.append(f"{text!r}: write {key}=VALUE")
        elif key in options:
            errors.append(f"{text!r}: option {key} is given twice")
        else:
            value, why = opt.parse(value)
            if value is None:
                errors.append(f"{text!r}: {why}")
            else:
                options[key] = value
    if colon and not rest.strip():
        errors.append(f"{text!r}: nothing after ':' (write {delegate}:option=value)")
    if errors:
        return None, errors
    name = _canonical(delegate, options)
    if len(name) > CONFIG_CHARS:
        return None, [f"{text!r}: its canonical form is over {CONFIG_CHARS} characters"]
    kept = tuple(sorted((k, v) for k, v in options.items() if spec.option(k).default != v))
    return RunConfig(name, delegate, kept), []


def canonical(text: str) -> str:
    """The stored name of a configuration written any accepted way (ValueError if bad)."""
    config, errors = parse_config(text)
    if config is None:
        raise ValueError("; ".join(errors))
    return config.name


#: The presets, by name.
CONFIGS: dict[str, RunConfig] = {name: parse_config(name)[0] for name in PRESETS}  # type: ignore[misc]


def stored_config(name: str) -> RunConfig:
    """The configuration a job or result row names: a preset or a canonical form, as
    parse_config made it (KeyError for any other spelling)."""
    if name in CONFIGS:
        return CONFIGS[name]
    config, _ = parse_config(name)
    if config is None or config.name != name:
        raise KeyError(name)
    return config


for _name, _c in CONFIGS.items():
    assert _c.name == _name, _name  # a preset's canonical form is its own name
DEFAULT_CONFIGS = ("cpu", "gpu-fp32", "gpu-fp16")

#: Device kind -> the presets its runner can run. A desktop OpenCL device runs the GPU
#: configurations; the host CPU reference runs `cpu`; a phone runs all three.
KIND_CONFIGS: dict[str, tuple[str, ...]] = {
    kind: tuple(n for n, c in CONFIGS.items() if kind in DELEGATES[c.delegate].kinds)
    for kind in ("cpu", "opencl", "android", "noop")
}


def split_configs(text: str | list[str] | tuple[str, ...]) -> list[str]:
    """The configurations of a `--configs` value (comma-separated) or of a list of them
    (each item may itself hold commas: repeated --configs)."""
    items = [text] if isinstance(text, str) else list(text)
    return [n.strip() for item in items for n in item.split(",") if n.strip()]


def parse_configs(text: str | list[str] | tuple[str, ...]) -> tuple[list[RunConfig], list[str]]:
    """The configurations named in `text` ("cpu,gpu-fp16,nnapi:fp16=true"), and every
    error found. Two spellings of one configuration are one configuration given twice."""
    names = split_configs(text)
    errors: list[str] = []
    configs: list[RunConfig] = []
    seen: dict[str, str] = {}
    if not names:
        errors.append(f"no configuration given (presets: {', '.join(PRESETS)}; or delegate:"
                      f"option=value;... with delegates {describe()})")  # fmt: skip
    for n in names:
        config, errs = parse_config(n)
        errors.extend(errs)
        if config is None:
            continue
        if config.name in seen:
            same = "" if seen[config.name] == n else f" (as {seen[config.name]!r})"
            errors.append(f"configuration {n!r} is given twice{same}")
            continue
        seen[config.name] = n
        configs.append(config)
    return configs, errors


def _as_config(config: RunConfig | str) -> RunConfig | None:
    if isinstance(config, RunConfig):
        return config
    return parse_config(config)[0]


def supports(
    kind: str, config: RunConfig | str, facts: dict[str, Any] | None = None
) -> tuple[bool, str]:
    """Whether a device of `kind` (with its recorded `facts`, when given) can run
    `config`, with the reason when it cannot."""
    from .device_support import check_device

    c = _as_config(config)
    if c is None:
        return False, f"unknown configuration {config!r}"
    if kind not in KIND_CONFIGS:
        return False, f"no runner for device kind {kind!r}"
    if kind not in DELEGATES[c.delegate].kinds:
        runs = sorted(d.name for d in DELEGATES.values() if kind in d.kinds)
        return False, f"{kind} devices run the {', '.join(runs)} delegates, not {c.name}"
    if kind == "opencl" and c.option("backend") == "gl":
        return False, "the desktop delegate runs OpenCL only (backend=cl), not gl"
    if kind == "opencl" and c.option("sustained") == "true":
        return False, "the desktop delegate has no sustained-speed mode"
    if kind == "cpu" and c.options:
        return False, "the desktop CPU reference is single-threaded: it takes no options"
    if facts is None or kind != "android":
        return True, ""
    return check_device(c, facts)
