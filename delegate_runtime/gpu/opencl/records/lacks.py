"""Why an op lacks a fast form its family has (op_forms.FORMS): the reasons several
records give (`GpuOp.lacks`). A reason says what was measured, or that nothing was."""

from __future__ import annotations

#: Kernels left generic after a measurement: specializing the elementwise kernels too
#: (binary4d, unary, reduce4d, select4d, copy4d, batch_matmul4d, cumsum_axis, pool2d, ...)
#: ran the audio models 1.2-1.5x faster warm, but compiled their copies 13.6 s cold for
#: the embedding model.
MEASURED_GENERIC = (
    "stays generic: specialized, 1.2-1.5x faster warm but 13.6 s cold "
    "(docs/notebook/26-2026-12-02-audio-models-openwakeword-on-an-h200-the-ops.md); "
    "waits for a per-kernel cache (issue 39)"
)
#: Without specialized copies a launch keeps its int arguments, so it is no layer.
NOT_SPECIALIZED = "its copies keep int arguments (not specialized), so they are no layers"
#: A kernel nobody has measured specialized.
NOT_MEASURED = "stays generic: not measured specialized"
#: A kernel summing over a window or a row has no per-element step.
NOT_PER_ELEMENT = "not one output element from one input element: no epilogue step"
#: Ops whose kernel takes no epilogue: not done.
NO_EPILOGUE = "takes no epilogue: not done"
#: The `unary` kernel takes no epilogue; a unary node after a kernel runs in that kernel's
#: epilogue where it has a step.
UNARY_NO_EPILOGUE = "the unary kernel takes no epilogue (the node is a step where it has one)"
#: An elementwise op with no epilogue step code (codes.STEP).
NO_STEP_CODE = "no epilogue step code for it (codes.STEP): not done"
