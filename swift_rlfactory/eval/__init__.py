"""Evaluation: the training agent loop, tools and rewards on a test set, with EM, F1, reward and pass@k.

``runner`` is the engine-agnostic loop (resume, one coroutine per episode), ``metrics`` the pure
aggregation, ``openai_client`` a served model, and ``command`` the ``swift-rlfactory eval`` CLI;
``shifts`` the phrasing shifts, ``robustness`` the check under them and ``choose`` the checkpoint choice.
``compare`` and ``failures`` are reports over finished evaluations (``python -m swift_rlfactory.eval.compare``).
Local models run through ms-swift's engines in :mod:`swift_rlfactory.adapters.swift_infer`.
"""
