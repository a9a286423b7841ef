"""The one error type for bad input.

Every loader and validator raises :class:`InputError` with a message of the form
``<where>: <item>: <what is wrong>; <what to do>``. The CLI prints that one line and exits
with status 2; nothing else turns bad input into a traceback.

Every part of the message passes through :func:`printable`: names taken from a file (op names,
paths) may hold newlines or terminal escape sequences, and an error must stay one harmless line.
"""

from __future__ import annotations

MAX_PART_CHARS = 300  # a part longer than this (a pasted file, a huge op name) is cut


def printable(text: object, limit: int = MAX_PART_CHARS) -> str:
    """``text`` as one safe terminal line: control and other non-printable characters (newlines,
    ESC of a terminal escape sequence, bidi overrides) written as Python escapes, cut to ``limit``."""
    s = str(text)
    if not s.isprintable():
        s = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in s)
    if limit and len(s) > limit:
        s = s[: limit - 3] + "..."
    return s


def first_sentence(text: object, limit: int = 120) -> str:
    """The gist of a library's error message for embedding in an InputError: terminal colour codes
    dropped, the first line, the first sentence, at most ``limit`` characters."""
    import re

    s = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", str(text)).strip()
    s = (s.splitlines() or [""])[0]
    s = re.split(r"(?<=[.!?])\s", s, maxsplit=1)[0].rstrip(".")
    return s if len(s) <= limit else s[: limit - 3] + "..."


def kind_of(value: object) -> str:
    """'a string', 'a number', 'a list', 'an object', ... for messages about JSON values of the wrong type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return {str: "a string", list: "a list", dict: "an object"}.get(type(value), f"a {type(value).__name__}")


class InputError(ValueError):
    """Bad user input: a file, a graph item, a placement entry or an option.

    The library states facts: ``where`` is a file or the library's own parameter (``cluster``,
    ``sim``, ``method``), never a command-line flag. ``kind``, when given, names the kind of error
    so that a front end can say it its own way: the command line (``placer.cli.advice``) puts the
    option that carried the value in ``where`` and its own advice in ``fix``."""

    def __init__(self, where: str, item: str, problem: str, fix: str, *, kind: str | None = None):
        self.where, self.item, self.problem, self.fix, self.kind = where, item, problem, fix, kind
        super().__init__(f"{printable(where)}: {printable(item)}: {printable(problem)}; {printable(fix)}")

    def at(self, where: str, kind: str | None = None) -> "InputError":
        """The same error attributed to a file (used when a validator did not know the path), of
        ``kind`` when given."""
        return InputError(where, self.item, self.problem, self.fix, kind=kind or self.kind)

    def advised(self, fix: str, where: str | None = None) -> "InputError":
        """The same facts with another advice (and, given, another ``where``): a front end's words."""
        return InputError(self.where if where is None else where, self.item, self.problem, fix, kind=self.kind)
