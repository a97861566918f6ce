"""`python -m evals`: run the eval datasets through the local platform and gate them against the baseline."""

from __future__ import annotations

import logging
import sys

from evals.run import main
from local.__main__ import _quiet_moto

# Only the tables and the verdict on the terminal: no per-request access log, no moto notice.
logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
_quiet_moto()
sys.exit(main())
