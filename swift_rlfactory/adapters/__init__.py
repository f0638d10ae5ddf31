"""Adapters to training frameworks. ``swift`` is the only module in the package that imports ms-swift."""
