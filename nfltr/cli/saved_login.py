# -*- test-case-name: tests.cli.test_login -*-
"""
The saved login: the relay, how to trust it and the API key, which
C{nfltr login} writes at the top of the user's config file
(C{$XDG_CONFIG_HOME/nfltr/nfltr.toml}, mode 0600), and which C{nfltr tcp},
C{nfltr http}, C{nfltr tcp-connect} and C{nfltr up} fall back on
(L{apply_login}): what the command line (or a config file) gives wins.

The saved login serves a command that names no relay, or the saved one;
its trust only when the command gives neither C{--ca} nor C{--relay-pin};
its key only when the command gives no key (C{--key}, C{--key-file} or
C{NFLTR_KEY}).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nfltr.cli.agent_options import RELAY_OPTIONS
from nfltr.cli.config_file import (
    CONFIG_NAME,
    ConfigFileError,
    load_text,
    read_values,
    user_config_dir,
)
from nfltr.cli.config_lines import TOP, locate

KEY_ENV = "NFLTR_KEY"
#: What a login saves (and replaces when run again).
LOGIN_KEYS = ("relay", "ca", "relay-pin", "key", "key-file")
_TRUST = ("ca", "relay-pin")
_KEY = ("key", "key-file")
_MARK = "# The relay and key saved by nfltr login."


def login_path(environ: Mapping[str, str] = os.environ) -> Path:
    """
    The user's config file, where the login is saved.
    """
    return user_config_dir(environ) / CONFIG_NAME


def saved_login(environ: Mapping[str, str] = os.environ,
                path: Path | None = None) -> dict[str, Any]:
    """
    The relay options saved in the user's config file (none if there is
    no such file); its entries are not read.

    @raise ConfigFileError: the file cannot be used (a key in it that
        others may read, say).
    """
    path = path or login_path(environ)
    if not path.exists():
        return {}
    text, mode = load_text(path)
    read = read_values(path, text, mode, top_only=True)
    if read.problems:
        raise ConfigFileError(path, read.problems)
    names = {o.name for o in RELAY_OPTIONS}
    return {k: v for k, v in read.top.items() if k in names and k in LOGIN_KEYS}


def apply_login(values: Mapping[str, Any], saved: Mapping[str, Any],
                environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """
    C{values} (relay options, keyed by name) completed from the C{saved}
    login, as the module docstring says.
    """
    merged = dict(values)
    if not saved or values.get("relay") not in (None, saved.get("relay")):
        return merged
    merged["relay"] = saved.get("relay")
    if all(values.get(k) is None for k in _TRUST):
        merged.update({k: saved.get(k) for k in _TRUST})
    if all(values.get(k) is None for k in _KEY) and KEY_ENV not in environ:
        merged.update({k: saved.get(k) for k in _KEY})
    return merged


def with_login(values: Mapping[str, Any],
               environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """
    A command's relay options (keyed by name) completed from the saved
    login (L{apply_login}).

    @raise nfltr.agent.ConfigError: the saved login cannot be read.
    """
    from nfltr.agent import ConfigError

    try:
        saved = saved_login(environ)
    except ConfigFileError as e:
        raise ConfigError(f"the saved login: {e}") from None
    return apply_login(values, saved, environ)


def login_text(old: str, login: Mapping[str, str]) -> str:
    """
    The user's config file C{old} with C{login} in place of the login it
    held: its other lines are kept, the new login comes first.
    """
    where = locate(old)
    drop = {line for (table, _, key), line in where.keys.items()
            if table == TOP and key in LOGIN_KEYS}
    kept = [line for n, line in enumerate(old.splitlines(), 1)
            if n not in drop and line != _MARK]
    head = [_MARK, *(f"{key} = {_toml_string(value)}" for key, value in login.items())]
    return "\n".join([*head, *kept]) + "\n"


def _toml_string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def write_login(path: Path, login: Mapping[str, str]) -> None:
    """
    Save C{login} in the config file C{path}, mode 0600 (its directory
    made, 0700, if need be), replacing the file in one step.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    new = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(new, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(login_text(old, login))
        os.chmod(new, 0o600)
        os.replace(new, path)
    except BaseException:
        new.unlink(missing_ok=True)
        raise
