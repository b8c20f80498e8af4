# -*- test-case-name: tests.agent.test_secrets -*-
"""
Secrets an agent or a client is given: its API key (C{--key}) and a share's
credentials (C{--basic-auth}, C{--bearer}, C{--require-header}).

Other users of the machine can read a process's command line (C{ps}), so
each secret can also come from a file, C{--NAME-file PATH}, or from the
environment (C{NFLTR_KEY}, C{NFLTR_BASIC_AUTH}, C{NFLTR_BEARER}): the
command line wins, then the file, then the variable.  A file must be a
regular file only its owner may read or change (as OpenSSH asks of private
keys: a mode of 0600 or 0400), of at most L{MAX_SECRET_FILE} bytes of UTF-8;
its line end is dropped.  Messages name where a secret came from, never
what it is.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from typing import Any

from ._errors import ConfigError

#: The largest secret file read: a file that is no secret (a log, a disk
#: image named by mistake) is refused before it is read into memory.
MAX_SECRET_FILE = 64 * 1024
BASIC_AUTH_ENV = "NFLTR_BASIC_AUTH"
BEARER_ENV = "NFLTR_BEARER"


def read_secret_file(path: str, option: str) -> str:
    """
    The text of the secret file C{path}, given to C{option}, without its
    last line end.

    @raise ConfigError: it is missing, not a regular file, readable or
        writable by others than its owner, empty, too big or not UTF-8.
    """
    where = f"{option} {path}"
    try:
        # Not blocking: a FIFO named by mistake is refused below, not waited on.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise ConfigError(f"{where} cannot be read: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError(f"{where} is not a regular file")
        if mode & 0o077:
            raise ConfigError(
                f"{where} has mode {stat.S_IMODE(mode):04o}: others than its owner may read or "
                f"change it; make it 0600 (chmod 600 {path})"
            )
        data = f.read(MAX_SECRET_FILE + 1)
    if len(data) > MAX_SECRET_FILE:
        raise ConfigError(f"{where} is over {MAX_SECRET_FILE} bytes: not a secret file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{where} is not UTF-8 text") from None
    text = text.removesuffix("\n").removesuffix("\r")
    if not text:
        raise ConfigError(f"{where} is empty")
    return text


def secret(values: Mapping[str, Any], environ: Mapping[str, str], name: str,
           env: str | None = None) -> str | None:
    """
    The one-line secret of option C{name}: C{values[name]}, else the file
    C{values[name + "-file"]}, else the variable C{env}; L{None} if none is
    given.

    @raise ConfigError: both the option and its file are given, the file
        cannot be used or holds more than one line, or the variable is set
        but empty.
    """
    return sourced_secret(values, environ, name, env)[0]


def sourced_secret(values: Mapping[str, Any], environ: Mapping[str, str], name: str,
                   env: str | None = None) -> tuple[str | None, str | None]:
    """
    L{secret}, and where it came from, for messages: C{--NAME-file PATH} or
    the variable's name; L{None} for the command line (or no secret).
    """
    given, path = values.get(name), values.get(f"{name}-file")
    if given is not None and path is not None:
        raise ConfigError(f"give --{name} or --{name}-file, not both")
    if given is not None:
        return given, None
    if path is not None:
        text = read_secret_file(path, f"--{name}-file")
        if "\n" in text or "\r" in text:
            raise ConfigError(f"--{name}-file {path}: give the secret on one line")
        return text, f"--{name}-file {path}"
    if env is not None and env in environ:
        if not environ[env]:
            raise ConfigError(f"{env} is set but empty: unset it or give the secret")
        return environ[env], env
    return None, None


def secret_lines(values: Mapping[str, Any], name: str) -> list[tuple[str, str]]:
    """
    The non-blank lines of the file C{values[name + "-file"]} (none if it is
    not given), each with where it was (C{line N of --NAME-file PATH}).

    @raise ConfigError: the file cannot be used.
    """
    path = values.get(f"{name}-file")
    if path is None:
        return []
    option = f"--{name}-file"
    text = read_secret_file(path, option)
    return [
        (line.rstrip("\r"), f"line {n} of {option} {path}")
        for n, line in enumerate(text.split("\n"), 1) if line.strip()
    ]
