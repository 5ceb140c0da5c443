from __future__ import annotations

import sys

from declaw_shell.pip import main

sys.exit(main(sys.argv[1:]))
