"""A MkDocs hook for docs/api.md: the code's docstrings name objects with Sphinx roles
(``:func:`name```), which Markdown renders as ``:func:<code>name</code>``; the role is dropped, the
name stays as code."""

import re

ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):(?=<code>)")


def on_page_content(html: str, **kwargs) -> str:
    return ROLE.sub("", html)
