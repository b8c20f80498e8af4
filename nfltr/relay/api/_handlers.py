# -*- test-case-name: tests.relay.api.test_routes -*-
"""
What each API route does (the table is L{ROUTES}; C{docs/api.md} describes
them for operators).  Store errors become refusals in L{store_refusal}.
"""

from __future__ import annotations

from typing import Any

from nfltr.store import (
    AccountExists,
    AccountInfo,
    AdminTokenInfo,
    IAdminTokens,
    InvalidLabel,
    InvalidName,
    InvalidSSHKey,
    KeyInfo,
    SSHKeyInfo,
    StoreError,
    StoreUnavailable,
    UnknownAccount,
    UnknownAdminToken,
    UnknownKey,
)

from ._routes import API_PREFIX, ApiError, Call, Route


def store_refusal(error: StoreError) -> ApiError:
    """
    The refusal a store error stands for.
    """
    status = 409
    if isinstance(error, InvalidName | InvalidLabel | InvalidSSHKey):
        status = 400
    elif isinstance(error, UnknownAccount | UnknownKey | UnknownAdminToken):
        status = 404
    elif isinstance(error, StoreUnavailable):
        status = 503
    elif isinstance(error, AccountExists):
        status = 409
    return ApiError(status, str(error))


def account_json(a: AccountInfo) -> dict[str, Any]:
    return {"name": a.name, "created_at": a.created_at}


def key_json(k: KeyInfo) -> dict[str, Any]:
    return {"keyid": k.keyid, "account": k.account, "label": k.label,
            "created_at": k.created_at, "revoked_at": k.revoked_at}


def ssh_json(k: SSHKeyInfo) -> dict[str, Any]:
    return {"fingerprint": k.fingerprint, "account": k.account, "algorithm": k.algorithm,
            "label": k.label, "created_at": k.created_at}


def token_json(t: AdminTokenInfo) -> dict[str, Any]:
    return {"tokenid": t.tokenid, "label": t.label, "read_only": t.read_only,
            "created_at": t.created_at, "revoked_at": t.revoked_at}


async def whoami(call: Call) -> tuple[int, Any]:
    principal = call.principal
    session = principal.session
    return 200, {"tokenid": principal.tokenid, "read_only": principal.readOnly,
                 "csrf": None if session is None else session.csrf}


async def relay_status(call: Call) -> tuple[int, Any]:
    return 200, call.view.status()


async def drain(call: Call) -> tuple[int, Any]:
    started = call.view.startDrain()
    return 202, {"draining": True, "started": started}


async def agents(call: Call) -> tuple[int, Any]:
    return 200, {"agents": call.view.listAgents()}


async def agent(call: Call) -> tuple[int, Any]:
    found = call.view.agent(call.params["name"])
    if found is None:
        raise ApiError(404, "no agent of this name is connected")
    return 200, found


async def kick(call: Call) -> tuple[int, Any]:
    if not call.view.kick(call.params["name"]):
        raise ApiError(404, "no agent of this name is connected")
    return 200, {"kicked": call.params["name"]}


async def sessions(call: Call) -> tuple[int, Any]:
    return 200, call.view.listSessions()


async def shares(call: Call) -> tuple[int, Any]:
    return 200, {"shares": call.view.listShares()}


async def accounts(call: Call) -> tuple[int, Any]:
    return 200, {"accounts": [account_json(a) for a in await call.store.list_accounts()]}


async def create_account(call: Call) -> tuple[int, Any]:
    name = call.text(call.body(), "name")
    return 201, account_json(await call.store.create_account(name))


async def keys(call: Call) -> tuple[int, Any]:
    listed = await call.store.list_keys(call.query("account"))
    return 200, {"keys": [key_json(k) for k in listed]}


async def create_key(call: Call) -> tuple[int, Any]:
    data = call.body()
    account = call.text(data, "account")
    info, plaintext = await call.store.create_key(account, call.optional(data, "label"))
    return 201, {**key_json(info), "key": plaintext}


async def revoke_key(call: Call) -> tuple[int, Any]:
    info = await call.store.revoke_key(call.params["keyid"])
    closed = call.view.revoked(info.keyid)
    return 200, {**key_json(info), "links_closed": closed}


async def ssh_keys(call: Call) -> tuple[int, Any]:
    listed = await call.store.list_ssh_keys(call.query("account"))
    return 200, {"ssh_keys": [ssh_json(k) for k in listed]}


async def add_ssh_key(call: Call) -> tuple[int, Any]:
    data = call.body()
    account, line = call.text(data, "account"), call.text(data, "key")
    info = await call.store.add_ssh_key(account, line, call.optional(data, "label"))
    return 201, ssh_json(info)


async def remove_ssh_key(call: Call) -> tuple[int, Any]:
    return 200, ssh_json(await call.store.remove_ssh_key(call.params["fingerprint"]))


def _tokens(call: Call) -> Any:
    return IAdminTokens(call.store)


async def admin_tokens(call: Call) -> tuple[int, Any]:
    listed = await _tokens(call).list_admin_tokens()
    return 200, {"admin_tokens": [token_json(t) for t in listed]}


async def create_admin_token(call: Call) -> tuple[int, Any]:
    data = call.body()
    readOnly = data.get("read_only", False)
    if not isinstance(readOnly, bool):
        raise ApiError(400, "the field 'read_only' must be true or false")
    info, plaintext = await _tokens(call).create_admin_token(
        call.optional(data, "label"), readOnly,
    )
    return 201, {**token_json(info), "token": plaintext}


async def revoke_admin_token(call: Call) -> tuple[int, Any]:
    info = await _tokens(call).revoke_admin_token(call.params["tokenid"])
    call.sessions.endToken(info.tokenid)
    return 200, token_json(info)


async def events(call: Call) -> tuple[int, Any]:  # pragma: no cover - served by EventStream
    raise ApiError(500, "served elsewhere")


P = API_PREFIX
#: Every route of the API (the events stream is served by L{nfltr.relay.api._events}).
ROUTES: tuple[Route, ...] = (
    Route("GET", f"{P}/session", False, "Who is calling: the token's id, read-only or not, "
          "and a session's CSRF token", whoami),
    Route("GET", f"{P}/relay", False, "The relay: version, readiness, counts", relay_status),
    Route("POST", f"{P}/relay/drain", True, "Drain the relay: no new links; it stops once "
          "sessions in flight finished (within its --drain-timeout)", drain),
    Route("GET", f"{P}/agents", False, "The connected agents", agents),
    Route("GET", f"{P}/agents/{{name}}", False, "One connected agent", agent),
    Route("POST", f"{P}/agents/{{name}}/kick", True, "Disconnect an agent", kick),
    Route("GET", f"{P}/shares", False, "The published shares", shares),
    Route("GET", f"{P}/sessions", False, "The sessions open towards native agents", sessions),
    Route("GET", f"{P}/events", False, "Server-sent events: a snapshot of the relay, its "
          "agents and shares, every second", events),
    Route("GET", f"{P}/accounts", False, "The accounts", accounts),
    Route("POST", f"{P}/accounts", True, "Create an account", create_account),
    Route("GET", f"{P}/keys", False, "API keys (?account=NAME: one account's)", keys),
    Route("POST", f"{P}/keys", True, "Create an API key (its text is in the answer, once)",
          create_key),
    Route("DELETE", f"{P}/keys/{{keyid}}", True, "Revoke an API key: its links close now",
          revoke_key),
    Route("GET", f"{P}/ssh-keys", False, "SSH keys (?account=NAME: one account's)", ssh_keys),
    Route("POST", f"{P}/ssh-keys", True, "Register an SSH public key", add_ssh_key),
    Route("DELETE", f"{P}/ssh-keys/{{fingerprint}}", True, "Unregister an SSH key",
          remove_ssh_key),
    Route("GET", f"{P}/admin-tokens", False, "Admin tokens", admin_tokens),
    Route("POST", f"{P}/admin-tokens", True, "Create an admin token (its text is in the "
          "answer, once)", create_admin_token),
    Route("DELETE", f"{P}/admin-tokens/{{tokenid}}", True, "Revoke an admin token: its "
          "sessions end", revoke_admin_token),
)
