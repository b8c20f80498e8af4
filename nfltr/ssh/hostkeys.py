# -*- test-case-name: tests.ssh.test_hostkeys -*-
"""
The relay's SSH host keys: an Ed25519 key and a 3072-bit RSA key (signing
with SHA-2 only, C{rsa-sha2-512} and C{rsa-sha2-256}) in OpenSSH's private
key format, in the files OpenSSH's sshd would use
(C{ssh_host_ed25519_key}, C{ssh_host_rsa_key}).

On the first start they are made, each written whole under a temporary
name with mode 0600 and then linked into place, so a crash leaves no
partial key and two processes starting at once end up with the same key.
On later starts they are read back.  A key file that others than its owner
may read or write, that cannot be read as an unencrypted OpenSSH private
key, that holds another kind of key, or an RSA key under 3072 bits, stops
the start with a L{HostKeyError} naming the file.  (An operator may put
keys of their own in place, e.g. sshd's, if they meet these rules.)
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from twisted.conch.ssh import keys
from twisted.logger import Logger
from twisted.python.filepath import FilePath

__all__ = ["HOST_KEY_FILES", "RSA_BITS", "HostKeyError", "load_or_create_host_keys"]

#: The kinds of host key (as conch's factories key them) and their files.
HOST_KEY_FILES = ((b"ssh-ed25519", "ssh_host_ed25519_key"), (b"ssh-rsa", "ssh_host_rsa_key"))

#: The size of the RSA key made, and the least accepted.
RSA_BITS = 3072

_log = Logger()

# Where a file system has no hard links, the key is renamed into place.
_NO_LINKS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV})


class HostKeyError(Exception):
    """
    A host key file that cannot be used; the message names it.
    """


def load_or_create_host_keys(directory: FilePath[Any] | str | os.PathLike[str],
                             ) -> dict[bytes, keys.Key]:
    """
    The host keys in C{directory} (made, with the directory, if missing), as
    conch's C{SSHFactory.privateKeys} wants them: by kind (C{b"ssh-ed25519"},
    C{b"ssh-rsa"}).  The public keys are C{{kind: key.public()}}.

    @raise HostKeyError: for a key file that cannot be used.
    """
    path = directory.path if isinstance(directory, FilePath) else os.fspath(directory)
    os.makedirs(path, mode=0o700, exist_ok=True)
    found = {}
    for kind, name in HOST_KEY_FILES:
        key_path = os.path.join(path, name)
        try:
            key = _load(key_path, kind)
        except FileNotFoundError:
            _create(key_path, kind)
            key = _load(key_path, kind)
            _log.info("SSH host key made: {file} ({fingerprint})", file=key_path,
                      fingerprint=_fingerprint(key))
        else:
            _log.info("SSH host key: {file} ({fingerprint})", file=key_path,
                      fingerprint=_fingerprint(key))
        found[kind] = key
    return found


def _fingerprint(key: keys.Key) -> str:
    """
    The key's type and OpenSSH SHA-256 fingerprint (public information).
    """
    digest = key.fingerprint(keys.FingerprintFormats.SHA256_BASE64).rstrip("=")
    return f"{key.sshType().decode('ascii')} SHA256:{digest}"


def _load(path: str, kind: bytes) -> keys.Key:
    """
    Read the key of C{kind} in C{path}.

    @raise FileNotFoundError: if there is none.
    @raise HostKeyError: if it cannot be used.
    """
    try:
        f = open(path, "rb")  # noqa: SIM115 -- closed by the with below
    except FileNotFoundError:
        raise
    except OSError as e:
        raise HostKeyError(f"SSH host key {path} cannot be read: {e.strerror}") from None
    with f:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise HostKeyError(f"SSH host key {path} is not a regular file")
        if mode & 0o077:
            raise HostKeyError(
                f"SSH host key {path} has mode {stat.S_IMODE(mode):04o}: others than its owner"
                f" may read or change it; make it 0600 (chmod 600 {path})"
            )
        data = f.read()
    try:
        private = serialization.load_ssh_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as e:
        raise HostKeyError(
            f"SSH host key {path} is not an unencrypted OpenSSH private key ({e})"
        ) from None
    if kind == b"ssh-ed25519" and not isinstance(private, ed25519.Ed25519PrivateKey):
        raise HostKeyError(f"SSH host key {path} is not an Ed25519 key")
    if kind == b"ssh-rsa":
        if not isinstance(private, rsa.RSAPrivateKey):
            raise HostKeyError(f"SSH host key {path} is not an RSA key")
        if private.key_size < RSA_BITS:
            raise HostKeyError(
                f"SSH host key {path} is an RSA key of {private.key_size} bits;"
                f" at least {RSA_BITS} are needed"
            )
    return keys.Key(private)


def _generate(kind: bytes) -> bytes:
    """
    A new key of C{kind}, in OpenSSH's private key format.
    """
    private: ed25519.Ed25519PrivateKey | rsa.RSAPrivateKey
    if kind == b"ssh-ed25519":
        private = ed25519.Ed25519PrivateKey.generate()
    else:
        private = rsa.generate_private_key(public_exponent=65537, key_size=RSA_BITS)
    return private.private_bytes(serialization.Encoding.PEM,
                                 serialization.PrivateFormat.OpenSSH,
                                 serialization.NoEncryption())


def _create(path: str, kind: bytes) -> None:
    """
    Make the key file C{path} unless another process just did.
    """
    temporary = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.new"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(_generate(kind))
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            return
        except OSError as e:
            if e.errno not in _NO_LINKS:
                raise
            os.replace(temporary, path)
    finally:
        if os.path.lexists(temporary):
            os.unlink(temporary)
    directory = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
