"""Errors a user can cause and fix; the CLI prints them as one line and exits 2."""


class UserError(Exception):
    """Bad input: a file, a flag or an environment the user controls.

    The message names what is wrong and where, so it is printed as is with no traceback.
    """
