"""What every farm part shares: schema and job states, job transitions, configurations,
settings, the database, the Celery app, selectors, and the one definition of each derived
result figure (`metrics`). It imports only `delegate_runtime`, never the parts above it."""
