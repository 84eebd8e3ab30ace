"""Small ARC-AGI-3 games shipped as package data, one folder per game.

Each folder holds the `metadata.json` that `arc_agi.Arcade` scans for and the game source
beside it; the toolkit executes that source itself, so the folders are not Python packages.
"""

from pathlib import Path

GAMES_DIR = Path(__file__).parent
