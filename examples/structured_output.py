"""Structured output: session.generate() returns a validated value.

Pass a dataclass (you get an instance back), a TypedDict, any annotation
@tool supports (list[str], ...), or a JSON Schema dict. The server validates
the model's JSON against the schema and fails loudly when it does not fit.

Runs offline on the built-in *scripted* provider: a deterministic stand-in
that replays the script below, not a language model.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from typing import TypedDict

from agentrpc import Client, StructuredOutputError, scripted


class Sky(enum.Enum):
    SUNNY = "sunny"
    RAIN = "rain"


@dataclasses.dataclass
class Day:
    weekday: str
    sky: Sky
    celsius: float


@dataclasses.dataclass
class Forecast:
    """A short weather forecast."""

    city: str
    days: list[Day]
    warning: str | None = None


class Contact(TypedDict):
    name: str
    email: str


async def main() -> None:
    print("[scripted provider: a deterministic stand-in, not a language model]")
    async with Client.spawn() as client:
        session = await client.open_session(model=scripted(
            {"text": ['{"city": "Oslo", "days": [{"weekday": "Mon", "sky": "rain", "celsius": 4},',
                      ' {"weekday": "Tue", "sky": "sunny", "celsius": 7}]}']},
            {"text": ['{"name": "Ada", "email": "ada@example.org"}']},
            {"text": ['["milk", "eggs"]']},
            {"text": ['{"city": "Oslo", "days": "soon"}']},
        ))
        forecast = await session.generate("Forecast for Oslo, two days.", Forecast)
        print(forecast.city, [(d.weekday, d.sky, d.celsius) for d in forecast.days], forecast.warning)

        contact = await session.generate("Ada's contact card", Contact)
        print(contact["name"], contact["email"])

        print(await session.generate("Shopping list", list[str]))

        try:
            await session.generate("Forecast again", Forecast)
        except StructuredOutputError as error:
            print("refused:", error.reason, "at", error.path)


if __name__ == "__main__":
    asyncio.run(main())
