"""Host code compiled by MLIR's ExecutionEngine, kept as a shared library for warm starts.

A cold compile JIT-compiles the LLVM-dialect module (tens of milliseconds of LLVM code
generation); its object code, linked into a shared library by the system's C compiler
driver, goes to the disk cache, and a later process `dlopen`s it (about a millisecond).
Both expose the packed wrappers `_mlir_<name>(void**)` of the module's functions. Without
a C compiler driver on PATH (or objcopy where symbols must be exported) nothing is linked
and warm starts JIT-compile again.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Sequence


def link(engine: Any, export: Sequence[str] = (), libraries: Sequence[str] = ()) -> bytes | None:
    """The engine's object code as a shared library; `export` makes those local symbols
    global (objcopy), `libraries` are linked (`-l<name>`). None where linking is impossible."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")
    objcopy = shutil.which("objcopy")
    if cc is None or export and objcopy is None:
        return None
    with tempfile.TemporaryDirectory(prefix="mlirfuse-link-") as tmp:
        obj, lib = os.path.join(tmp, "host.o"), os.path.join(tmp, "host.so")
        engine.dump_to_object_file(obj)
        for symbol in export:
            if subprocess.run([objcopy, f"--globalize-symbol={symbol}", obj], capture_output=True).returncode:
                return None
        # -Bsymbolic: the module's own definitions bind inside it; the rest resolves at load
        # time from what the process has loaded (libm, libmlir_cuda_runtime loaded global).
        command = [cc, "-shared", "-o", lib, obj, "-Wl,-Bsymbolic", *(f"-l{name}" for name in libraries)]
        done = subprocess.run(command, capture_output=True)
        if done.returncode != 0 or not os.path.exists(lib):
            return None
        return Path(lib).read_bytes()


def load(data: bytes) -> ctypes.CDLL:
    """dlopen a library from its bytes. Each load is a fresh file, so its constructors run
    again (for a GPU host module: loading its binary onto the current default device)."""
    fd, path = tempfile.mkstemp(prefix="mlirfuse-host-", suffix=".so")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return ctypes.CDLL(path)
    finally:
        os.unlink(path)  # the mapping stays valid


def packed(library: ctypes.CDLL, name: str) -> int:
    """Address of the packed wrapper `_mlir_<name>` in a loaded library, or 0."""
    try:
        return ctypes.cast(getattr(library, "_mlir_" + name), ctypes.c_void_p).value or 0
    except AttributeError:
        return 0
