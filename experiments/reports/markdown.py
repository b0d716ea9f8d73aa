"""Markdown reports rendered from jinja2 templates that ship in a package's ``templates`` folder.

Tags on lines of their own leave no line behind (``trim_blocks``, ``lstrip_blocks``), the file's
last newline is kept, and an unknown name fails the render instead of printing nothing.
"""

from __future__ import annotations

import jinja2

from experiments.format import number


def markdown_templates(package: str) -> jinja2.Environment:
    """The templates of ``package`` (its ``templates`` folder), with :func:`experiments.format.number` as the ``number`` filter."""
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader(package), undefined=jinja2.StrictUndefined, keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True
    )
    environment.filters["number"] = number
    return environment
