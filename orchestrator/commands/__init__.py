"""The orchestrator's subcommands of `devicefarm` (see orchestrator/cli.py)."""
