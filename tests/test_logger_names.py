"""Every module's logger is named after the module (a log reader finds the code a line came from, and a
renamed module renames its logger): each module of the four packages that has a module-level ``log``."""

from __future__ import annotations

import importlib
import logging
import pkgutil

import docbundle.bundle
import docbundle.common
import docbundle.indexer
import docbundle.server


def _modules() -> list[str]:
    names = []
    for package in (docbundle.common, docbundle.bundle, docbundle.server, docbundle.indexer):
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not info.name.endswith(".__main__"):  # running it would start the CLI
                names.append(info.name)
    return names


def test_each_logger_is_named_after_its_module() -> None:
    loggers = {}
    for name in _modules():
        log = getattr(importlib.import_module(name), "log", None)
        if isinstance(log, logging.Logger):
            loggers[name] = log.name
    assert {"docbundle.server.hits", "docbundle.server.mcp.tools", "docbundle.server.http.app"} <= set(
        loggers
    )
    assert {module: name for module, name in loggers.items() if name != module} == {}
