"""``python -m pytest_agentrace.cli``: the ``agentrace`` command."""

import sys

from pytest_agentrace.cli import main

sys.exit(main())
