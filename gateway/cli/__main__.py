"""``python -m gateway.cli`` runs the ``voxgate`` command."""

from __future__ import annotations

import sys

from gateway.cli.main import main

sys.exit(main())
