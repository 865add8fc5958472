"""One table from each delegate option to the official tools' flags, with the source file
that defines each flag (paths in google-ai-edge/LiteRT; the same files sit under
tensorflow/lite/tools/ in TensorFlow).

`benchmark_model` and inference diff's `run_eval` both take the delegate providers' flags
(`tflite/tools/delegates/*_delegate_provider.cc`, listed in
`tflite/tools/benchmark/README.md`). A flag's value may name a job-time fact:
`{serialize_dir}`, `{model_token}` or `{hexagon_lib_path}` (the runner fills them in).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .configs import RunConfig

GPU_PROVIDER = "tflite/tools/delegates/gpu_delegate_provider.cc"
NNAPI_PROVIDER = "tflite/tools/delegates/nnapi_delegate_provider.cc"
HEXAGON_PROVIDER = "tflite/tools/delegates/hexagon_delegate_provider.cc"
XNNPACK_PROVIDER = "tflite/tools/delegates/xnnpack_delegate_provider.cc"
DEFAULT_PROVIDER = "tflite/tools/delegates/default_execution_provider.cc"
RUN_EVAL = "tflite/tools/evaluation/tasks/inference_diff/run_eval.cc"


def _same(v: str) -> str:
    return v


def _const(text: str) -> Callable[[str], str]:
    return lambda _v: text


@dataclass(frozen=True)
class FlagRule:
    """`--flag=render(value)` for `delegate`'s `option` (None: the delegate itself)."""

    delegate: str
    option: str | None
    flag: str
    source: str
    render: Callable[[str], str] = _same
    always: bool = False  #: written at the option's default too
    #: the option's value for which the flag is written (None: any value but unset)
    when: str | None = None
    eval_too: bool = True  #: run_eval takes it beside --delegate


FLAG_TABLE: tuple[FlagRule, ...] = (
    # cpu: the interpreter without a delegate; the GPU switch is written off, as before
    FlagRule("cpu", None, "use_gpu", GPU_PROVIDER, _const("false"), eval_too=False),
    FlagRule("cpu", "threads", "num_threads", DEFAULT_PROVIDER),
    FlagRule("xnnpack", None, "use_xnnpack", XNNPACK_PROVIDER, _const("true"), eval_too=False),
    FlagRule("xnnpack", "threads", "num_threads", DEFAULT_PROVIDER),
    FlagRule("xnnpack", "fp16", "xnnpack_force_fp16", XNNPACK_PROVIDER, when="true"),
    FlagRule("gpu", None, "use_gpu", GPU_PROVIDER, _const("true"), eval_too=False),
    # the provider's default allows precision loss, so it is always written
    FlagRule("gpu", "precision", "gpu_precision_loss_allowed", GPU_PROVIDER,
             lambda v: "true" if v == "fp16" else "false", always=True),
    FlagRule("gpu", "backend", "gpu_backend", GPU_PROVIDER),
    FlagRule("gpu", "quant", "gpu_experimental_enable_quant", GPU_PROVIDER),
    FlagRule("gpu", "sustained", "gpu_inference_for_sustained_speed", GPU_PROVIDER),
    FlagRule("gpu", "serialize", "delegate_serialize_dir", DEFAULT_PROVIDER,
             _const("{serialize_dir}"), when="true"),
    FlagRule("gpu", "serialize", "delegate_serialize_token", DEFAULT_PROVIDER,
             _const("{model_token}"), when="true"),
    FlagRule("nnapi", None, "use_nnapi", NNAPI_PROVIDER, _const("true"), eval_too=False),
    FlagRule("nnapi", "accelerator", "nnapi_accelerator_name", NNAPI_PROVIDER),
    FlagRule("nnapi", "preference", "nnapi_execution_preference", NNAPI_PROVIDER),
    FlagRule("nnapi", "fp16", "nnapi_allow_fp16", NNAPI_PROVIDER, when="true"),
    FlagRule("hexagon", None, "use_hexagon", HEXAGON_PROVIDER, _const("true"), eval_too=False),
    FlagRule("hexagon", None, "hexagon_lib_path", HEXAGON_PROVIDER,
             _const("{hexagon_lib_path}")),
    FlagRule("hexagon", "profiling", "hexagon_profiling", HEXAGON_PROVIDER, when="true"),
)  # fmt: skip

#: run_eval's `--delegate` value per delegate (run_eval.cc: ParseStringToDelegateType).
EVAL_DELEGATE = {"cpu": "", "xnnpack": "xnnpack", "gpu": "gpu", "nnapi": "nnapi",
                 "hexagon": "hexagon"}  # fmt: skip


def _value(rule: FlagRule, config: RunConfig) -> str | None:
    if rule.option is None:
        return rule.render("")
    given = dict(config.options)
    value = given.get(rule.option)
    if value is None and rule.always:
        value = config.option(rule.option)
    if value is None or (rule.when is not None and value != rule.when):
        return None
    return rule.render(value)


def delegate_flags(config: RunConfig, for_eval: bool = False) -> list[tuple[str, str, str]]:
    """(flag, value, source) for a configuration, in the table's order; `for_eval`: the
    ones run_eval takes beside its `--delegate`."""
    out = []
    for rule in FLAG_TABLE:
        if rule.delegate != config.delegate or (for_eval and not rule.eval_too):
            continue
        value = _value(rule, config)
        if value is not None:
            out.append((rule.flag, value, rule.source))
    return out
