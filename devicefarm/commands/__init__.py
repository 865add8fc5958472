"""The farm's subcommands of `devicefarm` (see devicefarm/cli.py)."""
