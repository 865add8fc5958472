"""Which nodes each OpenCL kernel runs besides its own: the fusion pass (plan.py) and one
module per fusion, each with its rule and its conditions, whose tuning limits are the
session's switches (gpu/switches.py, handed to the rule by the plan's Scope), and a test
of its own (tests/ops/fusions/).

A plan is a `Chain` per kernel (opencl/chain.py); lowering.py and the records' lowerings
read it. To add a fusion: a module here with its NAME, its rule and `involves(record)`
(the ops taking part, so that op_forms.fusions_of reaches it from their records), its
place in plan.FUSION_MODULES (FUSIONS follows) and in plan_fusion, what its chain
records in chain.py, its limits as switches (gpu/switches.py: field, Knob with its record
name, measured default) read from `scope.switches`, and its test.
"""

from .plan import FUSIONS, plan_fusion

__all__ = ["FUSIONS", "plan_fusion"]
