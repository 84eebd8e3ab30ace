"""Maze: walk the player to the goal; ACTION1..ACTION4 move up, down, left and right.

Each level is a grid of one-pixel cells (the camera scales it to fill the 64x64 frame).
Walls block the player; stepping onto the goal completes the level. There is no losing
condition. The game is fully deterministic: the seed is accepted and ignored.
"""

from arcengine import ARCBaseGame, BlockingMode, Camera, GameAction, Level, Sprite

FLOOR = 0  # white
WALL = 3  # grey
PLAYER = 9  # blue
GOAL = 14  # green
LETTER_BOX = 5  # black

# "#" wall, "." floor, "P" the player's start, "G" the goal. Every map is closed by walls,
# and the cell above each start is a wall.
MAPS: list[list[str]] = [
    [
        "########",
        "#P..#..#",
        "##.##.##",
        "#...#..#",
        "#.#...##",
        "#.#.#..#",
        "#...#.G#",
        "########",
    ],
    [
        "############",
        "#P.....#...#",
        "#.####.#.#.#",
        "#.#....#.#.#",
        "#.#.####.#.#",
        "#.#......#.#",
        "#.######.#.#",
        "#......#.#.#",
        "######.#.#.#",
        "#......#.#G#",
        "#.######...#",
        "############",
    ],
    [
        "################",
        "#P.#.........#.#",
        "#..#.#######.#.#",
        "##.#.#.....#...#",
        "#..#.#.###.###.#",
        "#.##.#...#...#.#",
        "#....###.###.#.#",
        "####...#...#.#.#",
        "#....#.###.#.#.#",
        "#.####...#.#...#",
        "#.#....#.#.###.#",
        "#.#.####.#...#.#",
        "#.#....#.###.#.#",
        "#.####.#...#.#.#",
        "#......###.#..G#",
        "################",
    ],
]

MOVES: dict[GameAction, tuple[int, int]] = {
    GameAction.ACTION1: (0, -1),
    GameAction.ACTION2: (0, 1),
    GameAction.ACTION3: (-1, 0),
    GameAction.ACTION4: (1, 0),
}


def _find(rows: list[str], mark: str) -> tuple[int, int]:
    for y, row in enumerate(rows):
        x = row.find(mark)
        if x >= 0:
            return x, y
    raise ValueError(f"map has no {mark!r}")


def build_level(index: int, rows: list[str]) -> Level:
    """One level from its map: a wall sprite, the goal and the player."""
    width, height = len(rows[0]), len(rows)
    if any(len(row) != width for row in rows):
        raise ValueError(f"map {index} is not rectangular")
    walls = Sprite(
        [[WALL if cell == "#" else -1 for cell in row] for row in rows],
        name="walls",
        layer=0,
        blocking=BlockingMode.PIXEL_PERFECT,
    )
    goal_x, goal_y = _find(rows, "G")
    goal = Sprite([[GOAL]], name="goal", x=goal_x, y=goal_y, layer=1, collidable=False)
    start_x, start_y = _find(rows, "P")
    player = Sprite(
        [[PLAYER]],
        name="player",
        x=start_x,
        y=start_y,
        layer=2,
        blocking=BlockingMode.PIXEL_PERFECT,
    )
    return Level(sprites=[walls, goal, player], grid_size=(width, height), name=f"maze-{index + 1}")


class Maze(ARCBaseGame):
    """Three mazes of growing size; reaching the goal moves on to the next one."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(
            game_id="maze-0001",
            levels=[build_level(i, rows) for i, rows in enumerate(MAPS)],
            camera=Camera(background=FLOOR, letter_box=LETTER_BOX),
            available_actions=[1, 2, 3, 4],
            seed=seed,
        )

    def step(self) -> None:
        delta = MOVES.get(self.action.id)
        if delta is not None:
            self.try_move("player", *delta)
            player = self.current_level.get_sprites_by_name("player")[0]
            goal = self.current_level.get_sprites_by_name("goal")[0]
            if (player.x, player.y) == (goal.x, goal.y):
                self.next_level()
        self.complete_action()
