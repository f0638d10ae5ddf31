"""The file to pass to ``swift rlhf`` / ``swift rollout`` as ``--external_plugins``.

    swift rlhf --rlhf_type grpo ... --external_plugins $(swift-rlfactory plugin-path) \\
        --multi_turn_scheduler rlfactory --reward_funcs rlfactory --callbacks rlfactory

Importing it registers the ``rlfactory`` scheduler, reward and callback with ms-swift; the environment
comes from ``RLFACTORY_ENV``.
"""

from swift_rlfactory.adapters.swift import register

register()
