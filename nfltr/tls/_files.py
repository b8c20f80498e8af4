# -*- test-case-name: tests.test_pki -*-
"""
Reading and writing key and certificate files: atomically, privately, and
under a lock so that relay processes starting together agree on one set.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

PRIVATE_MODE = 0o600
PUBLIC_MODE = 0o644
DIRECTORY_MODE = 0o700


class PKIError(Exception):
    """
    Key or certificate files cannot be used as they are.  The message names
    the file and what to do.
    """


def write_atomically(path: Path, data: bytes, mode: int) -> None:
    """
    Replace C{path} with C{data}: write a temporary file of mode C{mode} in
    the same directory, flush it to disk, then rename it over C{path}, so
    that a reader sees the old file or the whole new one, never a part.
    """
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


@contextlib.contextmanager
def locked_directory(directory: Path) -> Iterator[Path]:
    """
    Create C{directory} (mode 0700) if missing and hold an exclusive lock on
    it for the body.
    """
    directory.mkdir(mode=DIRECTORY_MODE, parents=True, exist_ok=True)
    fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, PRIVATE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield directory
    finally:
        os.close(fd)


def load_or_create_key(path: Path) -> tuple[ec.EllipticCurvePrivateKey, bool]:
    """
    Load the ECDSA private key at C{path}, or create a P-256 one there
    (mode 0600) if there is no file.

    @return: the key, and whether it was created now.
    @raise PKIError: the file holds no usable EC private key.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        key = ec.generate_private_key(ec.SECP256R1())
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        write_atomically(path, pem, PRIVATE_MODE)
        return key, True
    try:
        loaded = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as e:
        raise PKIError(f"cannot read the private key {path}: {e}") from e
    if not isinstance(loaded, ec.EllipticCurvePrivateKey):
        raise PKIError(f"{path} holds a {type(loaded).__name__}; nfltr expects an EC key")
    return loaded, False


def load_certificate(path: Path) -> x509.Certificate | None:
    """
    Load the certificate at C{path}, or return L{None} if there is no file.
    A file that holds no certificate is treated as missing (it will be
    re-issued: a certificate is public and cheap to make again).
    """
    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except FileNotFoundError:
        return None
    except ValueError:
        return None


def save_certificate(path: Path, cert: x509.Certificate) -> None:
    """
    Write C{cert} to C{path} in PEM, atomically, mode 0644.
    """
    write_atomically(path, cert.public_bytes(serialization.Encoding.PEM), PUBLIC_MODE)
