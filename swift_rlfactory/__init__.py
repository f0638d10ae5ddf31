"""swift-rlfactory: train tool-using LLM agents with GRPO on ms-swift.

The package is layered so that each layer can be used and tested alone:

* :mod:`swift_rlfactory.tools` - tools from Python functions and MCP servers, the concurrent executor, the cache;
* :mod:`swift_rlfactory.env` - an environment (prompt + tools + limits + reward) loaded from one YAML file;
* :mod:`swift_rlfactory.rewards` - the reward registry;
* :mod:`swift_rlfactory.adapters` - the only code that imports ms-swift.
"""

__version__ = "0.1.0"
