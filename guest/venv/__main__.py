from __future__ import annotations

import sys

from venv import main

sys.exit(main(sys.argv[1:]))
