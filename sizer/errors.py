"""The error types the CLI turns into a one-line message and an exit code of their own."""


class SizerError(Exception):
    """Bad input or an environment sizer cannot work in (exit code 2); the message is shown to the
    user as is."""

    exit_code = 2


class LockHeld(SizerError):
    """Another sweep holds the per-host lock."""


class NothingSized(SizerError):
    """No workload has a usable measurement with real input, so none could be sized (exit code 3).
    Raised after the outputs that say why are written."""

    exit_code = 3
