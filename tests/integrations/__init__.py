"""(A package, so its conftest is `integrations.conftest` and never shadows tests/conftest.py,
which other test modules import as `conftest`.)"""
