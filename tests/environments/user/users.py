"""A scripted customer: it knows its order number (the row's hidden goal) and says so when asked, and it
ends the conversation the second time the agent turns to it, unless its goal says it is patient."""

STOP = "###STOP###"


class Customer:
    """Instantiated once by the environment; ``reply`` sees the goal and the conversation so far."""

    def reply(self, goal: dict, messages: list[dict]) -> str:
        spoken = [m for m in messages if m["role"] == "user"]  # the row's question, then its own turns
        if len(spoken) <= 1 or goal.get("patient"):
            return f"My order is {goal['order_id']}."
        return f"Thanks, that is all. {STOP}"
