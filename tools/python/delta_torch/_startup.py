"""Start-up hook: imported from delta_torch_startup.pth when DELTA_ENABLE is set, so that jobs
that cannot be edited run on DELTA. It enables DELTA before the job's own code runs, hence before
any CUDA work. A job that asked for DELTA and cannot get it stops with a clear message instead of
silently running on PyTorch's own allocator."""

import os
import sys

ENV_SWITCH = "DELTA_ENABLE"
_ON = {"1", "true", "yes", "on"}
_OFF = {"", "0", "false", "no", "off"}


def _fail(message):
    sys.stderr.write(f"delta_torch: {message}\n")
    sys.stderr.flush()
    # SystemExit raised while `site` runs becomes a fatal interpreter error with a traceback;
    # leaving directly keeps the message readable.
    os._exit(1)


def switch_value(environ=os.environ):
    """True / False for the DELTA_ENABLE setting; ValueError for anything else."""
    raw = environ.get(ENV_SWITCH, "")
    value = raw.strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise ValueError(
        f"{ENV_SWITCH}={raw!r} is not understood; use 1/true/yes/on to enable DELTA, "
        "0/false/no/off or unset to leave PyTorch's allocator in place"
    )


def run():
    try:
        wanted = switch_value()
    except ValueError as error:
        _fail(str(error))
        return
    if not wanted:
        return
    try:
        from ._allocator import enable

        enable()
    except Exception as error:  # noqa: BLE001 - every failure must end the job, with its reason
        _fail(f"{ENV_SWITCH}=1 but DELTA could not be enabled: {error}")


run()
