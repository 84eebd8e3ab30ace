"""Tap the targets: ACTION6 clicks the point (x, y) of the 64x64 frame.

Each level shows square targets in yellow on a black field. A click inside a target removes
it; when a level has no target left, the next level starts. A click that hits no target is
a miss, counted by the three pips in the top-left corner (grey, red once used); the third
miss loses the game. RESET clears the misses. A click without integer coordinates in
0..63 does nothing. The game is fully deterministic: the seed is accepted and ignored.
"""

from typing import Any

from arcengine import ARCBaseGame, BlockingMode, Camera, GameAction, Level, Sprite

BACKGROUND = 5  # black
TARGET = 11  # yellow
PIP_UNUSED = 2  # light grey
PIP_USED = 8  # red

GRID = 16  # cells per side; the camera scales each cell to 4x4 pixels
TARGET_SIZE = 3  # cells per side of a target
MAX_MISSES = 3

# Top-left cell of each target, per level.
TARGETS: list[list[tuple[int, int]]] = [
    [(3, 5), (10, 9)],
    [(2, 10), (7, 4), (12, 11)],
]


def build_level(index: int, corners: list[tuple[int, int]]) -> Level:
    """One level: its targets and the miss pips."""
    sprites = [
        Sprite(
            [[TARGET] * TARGET_SIZE for _ in range(TARGET_SIZE)],
            name=f"target-{n}",
            x=x,
            y=y,
            layer=1,
            blocking=BlockingMode.BOUNDING_BOX,
            tags=["target"],
        )
        for n, (x, y) in enumerate(corners)
    ]
    sprites += [
        Sprite([[PIP_UNUSED]], name=f"pip-{n}", x=1 + 2 * n, y=1, layer=2, tags=["pip"])
        for n in range(MAX_MISSES)
    ]
    return Level(sprites=sprites, grid_size=(GRID, GRID), name=f"tapx-{index + 1}")


def click_point(data: dict[str, Any]) -> tuple[int, int] | None:
    """The clicked frame pixel, or None when the action carries no valid coordinates."""
    x, y = data.get("x"), data.get("y")
    for value in (x, y):
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 63:
            return None
    assert isinstance(x, int) and isinstance(y, int)
    return x, y


class Tapx(ARCBaseGame):
    """Two levels of targets (two, then three); three misses in an attempt lose."""

    def __init__(self, seed: int = 0) -> None:
        self._misses = 0  # read by on_set_level, which the base constructor calls
        super().__init__(
            game_id="tapx-0001",
            levels=[build_level(i, corners) for i, corners in enumerate(TARGETS)],
            camera=Camera(background=BACKGROUND, letter_box=BACKGROUND),
            available_actions=[6],
            seed=seed,
        )

    def on_set_level(self, level: Level) -> None:
        self._show_misses(level)

    def level_reset(self) -> None:
        self._misses = 0
        super().level_reset()

    def full_reset(self) -> None:
        self._misses = 0
        super().full_reset()

    def step(self) -> None:
        if self.action.id == GameAction.ACTION6:
            point = click_point(self.action.data)
            if point is not None:
                self._click(*point)
        self.complete_action()

    def _click(self, x: int, y: int) -> None:
        level = self.current_level
        cell = self.camera.display_to_grid(x, y)
        hit = None
        if cell is not None:
            cx, cy = cell
            for target in level.get_sprites_by_tag("target"):
                if target.x <= cx < target.x + target.width and (
                    target.y <= cy < target.y + target.height
                ):
                    hit = target
                    break
        if hit is None:
            self._misses += 1
            self._show_misses(level)
            if self._misses >= MAX_MISSES:
                self.lose()
            return
        level.remove_sprite(hit)
        if not level.get_sprites_by_tag("target"):
            self.next_level()

    def _show_misses(self, level: Level) -> None:
        for n in range(MAX_MISSES):
            colour = PIP_USED if n < self._misses else PIP_UNUSED
            for pip in level.get_sprites_by_name(f"pip-{n}"):
                pip.color_remap(None, colour)
