"""Lamps: set a row of four lamps to the pattern shown above them, then submit.

ACTION1..ACTION4 toggle lamp 1..4 (left to right); ACTION5 submits. A submitted row that
matches the target pattern completes the level; any other row loses the game. The target
pattern is drawn as four small squares (orange on, light grey off) above the lamps (yellow
on, grey off) on a black field. The game is fully deterministic: the seed is ignored.
"""

from arcengine import ARCBaseGame, Camera, GameAction, Level, Sprite

BACKGROUND = 5  # black
TARGET_ON = 12  # orange
TARGET_OFF = 2  # light grey
LAMP_ON = 11  # yellow
LAMP_OFF = 3  # grey

GRID = 15  # cells per side; the camera scales each cell to 4x4 pixels
COLUMNS = [1, 5, 9, 13]  # left cell of lamp n (and of its target square)

# (lamps at the start, target pattern) per level, "1" on and "0" off, lamp 1 first.
LEVELS: list[tuple[str, str]] = [
    ("0000", "1010"),
    ("1100", "0111"),
]

TOGGLES: dict[GameAction, int] = {
    GameAction.ACTION1: 0,
    GameAction.ACTION2: 1,
    GameAction.ACTION3: 2,
    GameAction.ACTION4: 3,
}


def build_level(index: int, start: str, target: str) -> Level:
    """One level: the target squares (2x2 cells) and the lamps (2x4 cells)."""
    sprites: list[Sprite] = []
    for n, x in enumerate(COLUMNS):
        shown = TARGET_ON if target[n] == "1" else TARGET_OFF
        sprites.append(Sprite([[shown] * 2] * 2, name=f"target-{n}", x=x, y=2))
        lit = LAMP_ON if start[n] == "1" else LAMP_OFF
        sprites.append(Sprite([[lit] * 2] * 4, name=f"lamp-{n}", x=x, y=8))
    return Level(sprites=sprites, grid_size=(GRID, GRID), name=f"lamp-{index + 1}")


class Lamp(ARCBaseGame):
    """Two levels with different targets; a wrong submission is game over."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(
            game_id="lamp-0001",
            levels=[build_level(i, start, target) for i, (start, target) in enumerate(LEVELS)],
            camera=Camera(background=BACKGROUND, letter_box=BACKGROUND),
            available_actions=[1, 2, 3, 4, 5],
            seed=seed,
        )

    def step(self) -> None:
        action = self.action.id
        if action in TOGGLES:
            lamp = self._lamp(TOGGLES[action])
            lamp.color_remap(None, LAMP_OFF if self._is_on(lamp) else LAMP_ON)
        elif action == GameAction.ACTION5:
            row = "".join("1" if self._is_on(self._lamp(n)) else "0" for n in range(4))
            if row == LEVELS[self.level_index][1]:
                self.next_level()
            else:
                self.lose()
        self.complete_action()

    def _lamp(self, n: int) -> Sprite:
        return self.current_level.get_sprites_by_name(f"lamp-{n}")[0]

    @staticmethod
    def _is_on(lamp: Sprite) -> bool:
        return int(lamp.pixels[0, 0]) == LAMP_ON
