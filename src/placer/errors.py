"""The one error type for bad input.

Every loader and validator raises :class:`InputError` with a message of the form
``<where>: <item>: <what is wrong>; <what to do>``. The CLI prints that one line and exits
with status 2; nothing else turns bad input into a traceback.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input: a file, a graph item, a placement entry or an option."""

    def __init__(self, where: str, item: str, problem: str, fix: str):
        self.where, self.item, self.problem, self.fix = where, item, problem, fix
        super().__init__(f"{where}: {item}: {problem}; {fix}")

    def at(self, where: str) -> "InputError":
        """The same error attributed to a file (used when a validator did not know the path)."""
        return InputError(where, self.item, self.problem, self.fix)
