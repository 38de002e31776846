"""`python -m memframe` is the same as the `memframe` command."""

from memframe.cli import main

raise SystemExit(main())
