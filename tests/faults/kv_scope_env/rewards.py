"""A tool-verified reward on the trajectory's own server state, read before its process is given back."""

SEEN: dict[str, str] = {}  # the row's ``me`` -> what its store held when the reward read it


async def own_value(trajectory, **_) -> float:
    """1 when the trajectory's store holds its own ``me`` under ``k``."""
    record = await trajectory.call_tool("get", {"key": "k"})
    me = trajectory.row.get("me")
    SEEN[me] = record.observation if record.ok else f"error: {record.error}"
    return 1.0 if SEEN[me] == me else 0.0
