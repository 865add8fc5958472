"""devicefarm orchestrator: Celery app, database, submission, reconciler, allowlists."""
