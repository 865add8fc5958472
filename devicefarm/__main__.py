"""`python -m devicefarm`: the `devicefarm` command where its script is not installed."""

from .cli import main

raise SystemExit(main())
