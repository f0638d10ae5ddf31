"""Rollout: the agent loop's decisions, trajectory metrics and their reduction over ranks, engine-independent."""
