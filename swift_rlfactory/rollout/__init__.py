"""Rollout: the agent loop's decisions, trajectory metrics and the trajectory log, engine-independent."""
