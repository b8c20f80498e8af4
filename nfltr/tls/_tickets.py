# -*- test-case-name: tests.test_tls_resume -*-
"""
C{SSL_CTX_set_num_tickets} for one context, which neither pyOpenSSL nor
cryptography's bindings expose.

nfltr's OpenSSL configuration sets C{NumTickets = 0} for every context the
process makes (L{nfltr.tls._openssl_config}: no leg that cannot resume
sends useless TLS 1.3 tickets).  A context that resumes
(L{nfltr.tls._resume}) needs tickets again.  cryptography links OpenSSL
statically into its extension module and keeps the symbol local, so this
module finds it by name in that module's ELF symbol table, relative to the
module's exported C{PyInit__rust}, and calls it through C{ctypes}; it then
reads the value back with C{SSL_CTX_get_num_tickets}, found the same way.
Where anything is missing (another platform, a stripped build, a symbol
renamed), L{set_num_tickets} says so and changes nothing: the context then
sends no tickets and never resumes (the process's configuration holds).
"""

from __future__ import annotations

import ctypes
import functools
import struct
from pathlib import Path
from typing import Any

from OpenSSL import SSL

_MODULE = "cryptography.hazmat.bindings._rust"
_ANCHOR = "PyInit__rust"
_SET, _GET = "SSL_CTX_set_num_tickets", "SSL_CTX_get_num_tickets"
_SHT_SYMTAB = 2
#: The identification bytes of an ELF64 little-endian file.
_ELF64_LE = b"\x7fELF\x02\x01"
#: The largest symbol table read (bytes): cryptography's is under 10 MB.
MAX_SYMTAB = 64 << 20


def _elf_symbols(path: Path, names: set[str]) -> dict[str, int]:
    """
    The values of C{names} in the ELF64 little-endian file C{path}'s
    C{.symtab}; those not found are left out.
    """
    found: dict[str, int] = {}
    with path.open("rb") as f:
        header = f.read(64)
        if header[:6] != _ELF64_LE:
            return found
        shoff, = struct.unpack_from("<Q", header, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", header, 0x3A)
        f.seek(shoff)
        sections = [struct.unpack_from("<IIQQQQIIQQ", f.read(shentsize)) for _ in range(shnum)]
        for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
            if kind != _SHT_SYMTAB or size > MAX_SYMTAB or not entsize:
                continue
            strtab = sections[link]
            f.seek(offset)
            table = f.read(size)
            f.seek(strtab[4])
            strings = f.read(min(strtab[5], MAX_SYMTAB))
            for start in range(0, len(table) - entsize + 1, entsize):
                nameAt, = struct.unpack_from("<I", table, start)
                end = strings.find(b"\0", nameAt)
                name = strings[nameAt:end].decode("ascii", "replace")
                if name in names:
                    found[name], = struct.unpack_from("<Q", table, start + 8)
    return found


@functools.cache
def _functions() -> tuple[Any, Any] | None:
    """
    C{(set, get)} as ctypes functions, or L{None} where they cannot be
    found.
    """
    try:
        import importlib

        module = importlib.import_module(_MODULE)
        path = Path(module.__file__ or "")
        wanted = {_ANCHOR, _SET, _GET}
        symbols = _elf_symbols(path, wanted)
        if len(symbols) != len(wanted):
            return None
        library = ctypes.CDLL(str(path))
        anchor = ctypes.cast(getattr(library, _ANCHOR), ctypes.c_void_p).value
    except (OSError, AttributeError, ImportError, struct.error, IndexError):
        return None
    if anchor is None:
        return None
    base = anchor - symbols[_ANCHOR]
    setter = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t)(base + symbols[_SET])
    getter = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_void_p)(base + symbols[_GET])
    return setter, getter


def _pointer(context: SSL.Context) -> int:
    from OpenSSL._util import ffi

    handle: Any = context._context  # pyOpenSSL has no public accessor
    return int(ffi.cast("uintptr_t", handle))


def num_tickets(context: SSL.Context) -> int | None:
    """
    How many TLS 1.3 tickets C{context}'s connections send, or L{None}
    where that cannot be read.
    """
    functions = _functions()
    if functions is None:
        return None
    return int(functions[1](_pointer(context)))


def set_num_tickets(context: SSL.Context, count: int) -> bool:
    """
    Make C{context}'s server connections send C{count} TLS 1.3 tickets.

    @return: whether it now does (read back).
    """
    functions = _functions()
    if functions is None:
        return False
    pointer = _pointer(context)
    functions[0](pointer, count)
    return int(functions[1](pointer)) == count
