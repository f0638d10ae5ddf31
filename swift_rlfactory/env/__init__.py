"""Environments: an agent task (system prompt, tools, limits, cache, reward) described by one YAML file."""
