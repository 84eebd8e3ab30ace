"""How every `satchel` command presents itself: `-h` and `--help`, conventional metavars.

Typer labels each option with its Python type (`<str>`, `<list[Path]>`, `<bool>` even beside a
flag) and a required argument as `{name}`. The command and group classes here give each option
the metavar a well-kept CLI shows instead (`TEXT`, `INTEGER`, `PATH`, `a|b` for choices,
nothing beside a flag), and each argument its upper-case name (`TOKEN`, `[SCRIPT]`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import typer
from typer._click import Command as ClickCommand  # the base typer's own classes extend
from typer._click import Context  # the context type typer's own classes declare
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}
"""Context settings giving every command `-h` beside `--help` (subcommands inherit them)."""

MARKUP: Literal["markdown"] = "markdown"
"""Help text is Markdown: paragraphs reflow to the terminal, and brackets stay text."""

_TYPE_METAVARS: dict[object, str] = {str: "TEXT", int: "INTEGER", float: "FLOAT", Path: "PATH"}


class PlainArgument(TyperArgument):
    """An argument shown by its metavar alone: `TOKEN` when required, `[SCRIPT]` when not."""

    def display_type_rich(self, ctx: Context) -> str | None:
        return None

    def get_usage_pieces(self, ctx: Context) -> list[str]:
        name = self.display_name_raw + ("..." if self.nargs != 1 else "")
        return [name if self.required else f"[{name}]"]


def _option_metavar(option: TyperOption) -> str:
    if option.is_flag:
        return ""
    descriptor = option.type_descriptor
    if descriptor.choices is not None:
        return "|".join(str(choice) for choice in descriptor.choices)
    if descriptor.is_path:
        return "PATH"
    annotation: Any = descriptor.annotation
    if descriptor.is_list:
        (annotation,) = getattr(annotation, "__args__", (str,))
    return _TYPE_METAVARS.get(annotation, "TEXT")


def _settle(params: list[Any]) -> None:
    for param in params:
        if isinstance(param, TyperArgument):
            param.__class__ = PlainArgument
            if param.metavar is None and param.name:
                param.metavar = param.name.upper()
        elif isinstance(param, TyperOption) and param.metavar is None:
            param.metavar = _option_metavar(param)


class _Conventional(ClickCommand):
    """What satchel's commands and groups share: the conventions above, and a bare `-h, --help`."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        _settle(self.params)

    def get_help_option(self, ctx: Context) -> TyperOption | None:
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option


class Command(_Conventional, TyperCommand):
    """A command whose help follows the conventions above."""


class Group(_Conventional, TyperGroup):
    """A group of commands whose help follows the conventions above."""


def group(help: str) -> typer.Typer:
    """A `typer.Typer` for a group of satchel commands: `-h`, Markdown help, no completion."""
    return typer.Typer(
        cls=Group,
        help=help,
        context_settings=HELP_OPTIONS,
        rich_markup_mode=MARKUP,
        no_args_is_help=True,
        add_completion=False,
    )
