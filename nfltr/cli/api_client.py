# -*- test-case-name: tests.cli.test_api_client -*-
"""
The C{--api URL --admin-token-file FILE} of C{nfltr accounts}, C{nfltr keys}
and C{nfltr admin}: L{ApiStore} gives a relay's API (L{nfltr.relay.api})
the face of the store the commands' actions are written against, so the
same actions manage a cluster through any of its relays, without its data
directory or its Redis password.

Each call is one blocking HTTP request (the command does nothing else), and
returns a L{Deferred} that has fired, as the SQLite core's do in
L{nfltr.cli.keys}.  An error answer becomes a L{CommandError} with the
relay's message; the admin token is sent in C{Authorization} and never
printed.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed

from nfltr.store import AccountInfo, AdminTokenInfo, KeyInfo, SSHKeyInfo

#: Seconds one API request may take.
API_TIMEOUT = 30.0
#: The longest admin token file read.
MAX_TOKEN_FILE = 4096
API_PREFIX = "/api/v1"


class ApiError(Exception):
    """
    The API refused, or could not be reached; the text says which and why.
    """


def read_token(path: str) -> str:
    """
    The admin token in the file C{path} (surrounding white space left out).

    @raise ApiError: unreadable or empty.
    """
    try:
        text = Path(path).read_bytes()[:MAX_TOKEN_FILE].decode("ascii").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise ApiError(f"cannot read the admin token file {path}: {e}") from None
    if not text:
        raise ApiError(f"the admin token file {path} is empty")
    return text


class ApiStore:
    """
    A relay's API as the store of the commands; see the module.
    """

    def __init__(self, url: str, token: str, timeout: float = API_TIMEOUT) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ApiError(f"--api {url}: give the admin listener's URL, http://HOST:PORT")
        self.base = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self.base + API_PREFIX + path, data=data,
                                         method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as e:
            raise ApiError(f"the relay's API refused: {_message(e)} (HTTP {e.code})") from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            why = getattr(e, "reason", e)
            raise ApiError(f"cannot reach the relay's API at {self.base}: {why}") from None

    def _deferred(self, method: str, path: str, body: Any, make: Any) -> Deferred[Any]:
        try:
            return succeed(make(self._call(method, path, body)))
        except ApiError as e:
            return fail(e)

    def create_account(self, name: str) -> Deferred[AccountInfo]:
        return self._deferred("POST", "/accounts", {"name": name}, _account)

    def list_accounts(self) -> Deferred[list[AccountInfo]]:
        return self._deferred("GET", "/accounts", None,
                              lambda d: [_account(a) for a in d["accounts"]])

    def create_key(self, account: str, label: str | None = None
                   ) -> Deferred[tuple[KeyInfo, str]]:
        return self._deferred("POST", "/keys", {"account": account, "label": label},
                              lambda d: (_key(d), d["key"]))

    def list_keys(self, account: str | None = None) -> Deferred[list[KeyInfo]]:
        query = "" if account is None else "?" + urllib.parse.urlencode({"account": account})
        return self._deferred("GET", "/keys" + query, None,
                              lambda d: [_key(k) for k in d["keys"]])

    def revoke_key(self, keyid: str) -> Deferred[KeyInfo]:
        return self._deferred("DELETE", "/keys/" + _segment(keyid), None, _key)

    def add_ssh_key(self, account: str, line: str, label: str | None = None
                    ) -> Deferred[SSHKeyInfo]:
        body = {"account": account, "key": line, "label": label}
        return self._deferred("POST", "/ssh-keys", body, _ssh)

    def list_ssh_keys(self, account: str | None = None) -> Deferred[list[SSHKeyInfo]]:
        query = "" if account is None else "?" + urllib.parse.urlencode({"account": account})
        return self._deferred("GET", "/ssh-keys" + query, None,
                              lambda d: [_ssh(k) for k in d["ssh_keys"]])

    def remove_ssh_key(self, fingerprint: str) -> Deferred[SSHKeyInfo]:
        return self._deferred("DELETE", "/ssh-keys/" + _segment(fingerprint), None, _ssh)

    def create_admin_token(self, label: str | None = None, read_only: bool = False
                           ) -> Deferred[tuple[AdminTokenInfo, str]]:
        body = {"label": label, "read_only": read_only}
        return self._deferred("POST", "/admin-tokens", body, lambda d: (_token(d), d["token"]))

    def list_admin_tokens(self) -> Deferred[list[AdminTokenInfo]]:
        return self._deferred("GET", "/admin-tokens", None,
                              lambda d: [_token(t) for t in d["admin_tokens"]])

    def revoke_admin_token(self, tokenid: str) -> Deferred[AdminTokenInfo]:
        return self._deferred("DELETE", "/admin-tokens/" + _segment(tokenid), None, _token)


def _segment(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _message(error: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(error.read()).get("error", error.reason))
    except (ValueError, AttributeError, OSError):
        return str(error.reason)


def _account(d: dict[str, Any]) -> AccountInfo:
    return AccountInfo(d["name"], d["created_at"])


def _key(d: dict[str, Any]) -> KeyInfo:
    return KeyInfo(d["keyid"], d["account"], d["label"], d["created_at"], d["revoked_at"])


def _ssh(d: dict[str, Any]) -> SSHKeyInfo:
    return SSHKeyInfo(d["fingerprint"], d["account"], d["algorithm"], d["label"],
                      d["created_at"])


def _token(d: dict[str, Any]) -> AdminTokenInfo:
    return AdminTokenInfo(d["tokenid"], d["label"], d["read_only"], d["created_at"],
                          d["revoked_at"])
