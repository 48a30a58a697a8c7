"""``python -m tomstats``: the same as the ``tomstats`` command."""

import sys

from tomstats.cli import main

sys.exit(main())
