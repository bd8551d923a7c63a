"""What @tool derives from a function: name, description, JSON Schema.

No server needed: this prints the ToolSpec the session would be created with.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Annotated, Literal

from agentrpc import ToolContext, tool


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


@dataclasses.dataclass
class Assignee:
    name: str
    email: str | None = None


@tool(confirmation="always", annotations={"destructive": False})
async def create_ticket(
    title: Annotated[str, "One line, imperative."],
    priority: Priority,
    labels: list[str],
    assignee: Assignee | None = None,
    due: Literal["today", "this week", "later"] = "later",
    ctx: ToolContext | None = None,
) -> str:
    """Create a ticket in the tracker.

    The ticket is created in the default project.

    Args:
        labels: Free-form labels, lowercase.
        assignee: Who should do it; nobody if absent.
    """
    return f"created {title!r}"


spec = create_ticket.spec()
print(spec["name"], "-", spec["description"], "| confirmation:", spec["confirmation"])
schema = spec["inputSchema"]
print("required:", schema["required"])
for name, prop in schema["properties"].items():  # ctx is filled in by the client, not described
    print(f"  {name}: {json.dumps(prop)}")

try:
    @tool
    def broken(ids: set[int]) -> None:
        """Sets have no JSON form."""
except TypeError as error:
    print("TypeError:", error)
