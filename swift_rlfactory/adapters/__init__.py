"""Adapters to training frameworks: the only modules in the package that import ms-swift.

``swift`` plugs the scheduler, reward and callback into ms-swift training; ``swift_infer`` runs ms-swift's
inference engines for evaluation; ``swift_template`` holds what both must render identically.
"""
