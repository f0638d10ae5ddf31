"""swift-rlfactory: train tool-using LLM agents with GRPO on ms-swift.

Layered so that each layer (tools, env, rewards, adapters: the only ms-swift importer) can be used and
tested alone; docs/README.md ("The package") and the pages it lists.
"""

__version__ = "0.1.0"
