"""The environment record written beside every experiment's results: package versions, git commit,
machine. Versions are read from the installed metadata, so nothing heavy (torch) is imported."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from importlib import metadata

from placer.cost.host import cpu_name

PACKAGES = ("placer", "numpy", "scipy", "numba", "pymetis", "ortools", "torch", "gymnasium", "matplotlib", "typer")


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _git(args: list[str], cwd) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def environment(repo) -> dict:
    commit = _git(["rev-parse", "HEAD"], repo)
    dirty = _git(["status", "--porcelain", "--", "src"], repo)
    return {
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": {"cpu": cpu_name(), "cpus": os.cpu_count(), "arch": platform.machine()},
        "packages": {p: package_version(p) for p in PACKAGES},
        "git": {"commit": commit, "src_modified": bool(dirty) if dirty is not None else None},
    }
