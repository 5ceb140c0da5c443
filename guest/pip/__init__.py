"""`python3 -m pip` in the guest: declaw's pip (declaw_shell/pip.py), not PyPA's; installs are
done by the host, since the guest has no network."""

from __future__ import annotations
