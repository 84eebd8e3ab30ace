"""The reference integration's conformance driver: `python -m satchel.conformance.reference`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from satchel.conformance.reference.agent import ReferenceAgent, run_turn
from satchel.conformance.reference.breaks import BREAKS
from satchel.integrations import driver
from satchel.integrations.core import AgentMemory
from satchel.integrations.driver import Instruction, Report


def main(argv: Sequence[str] | None = None) -> None:
    """The driver: the reference integration, or one of its broken variants, on stdio."""
    parser = argparse.ArgumentParser(
        prog="python -m satchel.conformance.reference",
        description="The reference integration's conformance driver.",
    )
    parser.add_argument(
        "--break",
        dest="broken",
        metavar="NAME",
        choices=[b.name for b in BREAKS],
        help="break one rule (see --list-breaks)",
    )
    parser.add_argument(
        "--list-breaks", action="store_true", help="print each switch and the rule it breaks"
    )
    arguments = parser.parse_args(argv)
    if arguments.list_breaks:
        for switch in BREAKS:
            print(f"{switch.name}\t{switch.rule}")
        return
    chosen = next((b for b in BREAKS if b.name == arguments.broken), None)
    agent_type = chosen.agent if chosen else ReferenceAgent
    memory_type = chosen.memory if chosen else AgentMemory

    async def run(instruction: Instruction) -> Report:
        return await run_turn(instruction, agent_type, memory_type)

    driver.main(run)


if __name__ == "__main__":
    main()
