"""The orders world of the customer-service example: the shop, its tools, the goals and the rewards."""
