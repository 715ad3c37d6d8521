"""python -m delta_torch info: which libdelta.so this environment uses and how it is set up."""

import argparse
import json
import os
import sys

from . import __version__, _native
from .errors import DeltaError

_SETTING_PREFIXES = ("DELTA_",)
_SETTING_NAMES = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "LD_PRELOAD")


def _settings(environ):
    return {
        name: value
        for name, value in sorted(environ.items())
        if name.startswith(_SETTING_PREFIXES) or name in _SETTING_NAMES
    }


def device_kind(stats):
    """The device kind ("cuda" or "sim", with the GPU profile when known) from the stats JSON."""
    device = stats.get("device")
    if isinstance(device, str):
        return device
    if isinstance(device, dict):
        kind = device.get("kind") or device.get("name")
        detail = device.get("profile") or device.get("gpu")
        if kind and detail and detail != kind:
            return f"{kind} ({detail})"
        if kind:
            return str(kind)
    for key in ("device_kind", "device_type"):
        if isinstance(stats.get(key), str):
            return stats[key]
    return None


def collect_info(environ=os.environ):
    """Everything `info` reports, as a dict. Failures are reported in the dict, not raised,
    except a missing library, which is the one thing info cannot do without."""
    _, path, origin = _native.load()
    info = {
        "package_version": __version__,
        "library": path,
        "found_via": origin,
        "library_version": _native.version(),
        "settings": _settings(environ),
    }
    try:
        stats = json.loads(_native.stats_json())
    except (DeltaError, ValueError) as error:
        info["device"] = None
        info["device_error"] = str(error)
    else:
        info["device"] = device_kind(stats)
        info["stats"] = stats
    return info


def _print_text(info, out):
    out.write(f"delta_torch  {info['package_version']}\n")
    out.write(f"library      {info['library']}  (found via {info['found_via']})\n")
    out.write(f"version      {info['library_version']}\n")
    if info.get("device_error"):
        out.write(f"device       unavailable: {info['device_error']}\n")
    else:
        out.write(f"device       {info['device'] or 'not reported by the library'}\n")
    out.write("settings\n")
    if not info["settings"]:
        out.write("  (none: no DELTA_* or PYTORCH_*ALLOC_CONF variable is set)\n")
    for name, value in info["settings"].items():
        out.write(f"  {name}={value}\n")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m delta_torch", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    info_parser = commands.add_parser("info", help="library found, version, device kind, settings")
    info_parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    try:
        info = collect_info()
    except DeltaError as error:
        sys.stderr.write(f"delta_torch: {error}\n")
        return 1
    if args.json:
        json.dump(info, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        _print_text(info, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
