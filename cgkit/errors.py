"""Errors that carry a message meant for the user (no traceback needed)."""


class CgkitError(Exception):
    """A problem with the user's input: bad options, a missing file, an unknown name.

    The CLI prints the message and exits with status 2.
    """
