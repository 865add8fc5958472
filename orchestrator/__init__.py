"""devicefarm orchestrator: submission, the reconciler, reports and allowlists (on farm_core)."""
