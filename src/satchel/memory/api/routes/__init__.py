"""The v1 routes: every module here exposes a `router`, collected in name order."""

import importlib
import pkgutil

from fastapi import APIRouter

ROUTERS: list[APIRouter] = [
    importlib.import_module(f"{__name__}.{module.name}").router
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name)
]
