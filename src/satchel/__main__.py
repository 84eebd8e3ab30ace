"""Run the `satchel` command with `python -m satchel`."""

from satchel.cli import main

main()
