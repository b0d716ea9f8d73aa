"""The one base of every error a user can fix: a bad input, flag or file, a missing package, a
refused resume. The commands and the study catch it once and print its message as one ``error:``
line with exit status 2 (:func:`experiments.cli.run_cli`); anything else is a bug and keeps its
traceback. Each subclass keeps its standard base too (``ValueError``, ``RuntimeError``...), so code
that caught those still does. A module without imports: naming it loads nothing."""


class UserError(Exception):
    """A problem the user can fix; its message says what and how, in one line."""


def first_line(error: BaseException) -> str:
    """The first line of ``error``'s message, or its type's name when the message is empty: what a one-line refusal quotes."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
