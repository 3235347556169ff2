"""The one error type the CLI turns into a one-line message and exit code 2."""


class SizerError(Exception):
    """Bad input or an environment sizer cannot work in; the message is shown to the user as is."""

    exit_code = 2


class LockHeld(SizerError):
    """Another sweep holds the per-host lock."""
