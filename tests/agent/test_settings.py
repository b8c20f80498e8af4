"""
Tests for the checking of the agent's and the client's options:
L{nfltr.agent.relay_settings}, L{nfltr.agent.agent_options},
L{nfltr.client.connect_options} and their helpers.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

from twisted.internet.endpoints import HostnameEndpoint
from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent import (
    ConfigError,
    agent_options,
    parse_address,
    parse_bool,
    prepare_agent,
    relay_settings,
)
from nfltr.client import connect_options
from nfltr.link import PRESETS
from nfltr.tls import (
    TICKET_LIFETIME,
    ResumingServerTLS,
    ServerTLS,
    TLSClientEndpoint,
    ensure_relay_pki,
)

PIN = "sha256:" + "ab" * 32
KEY = "nfk_secret"


def values(**kw: Any) -> dict[str, Any]:
    """
    Relay option values with a pin and a key, overridden by C{kw}
    (C{relay_pin} for C{relay-pin}, C{state_dir} for C{state-dir}).
    """
    base: dict[str, Any] = {"relay-pin": PIN, "key": KEY}
    for name, value in kw.items():
        base[name.replace("_", "-")] = value
    return base


class RelaySettingsTests(SynchronousTestCase):
    """
    L{relay_settings}: address, trust, key, keepalive.
    """

    def test_defaults(self) -> None:
        """
        Without C{--relay} and C{--keepalive}: localhost:8443 and the
        default preset.
        """
        settings = relay_settings(values(), environ={})
        self.assertEqual((settings.host, settings.port), ("localhost", 8443))
        self.assertEqual(settings.address, "localhost:8443")
        self.assertEqual(settings.keepalive, PRESETS["default"])
        self.assertEqual(settings.pin, PIN)
        self.assertEqual(settings.trust_arguments(), f"--relay-pin {PIN}")

    def test_keyFromEnvironment(self) -> None:
        """
        The key comes from C{--key}, else from C{NFLTR_KEY}.
        """
        self.assertEqual(relay_settings(values(key=None), {"NFLTR_KEY": "k1"}).key, "k1")
        self.assertEqual(relay_settings(values(key="k2"), {"NFLTR_KEY": "k1"}).key, "k2")

    def test_keyRequired(self) -> None:
        """
        No key at all: an error that says where to put one and how to make
        one.
        """
        e = self.assertRaises(ConfigError, relay_settings, values(key=None), {})
        self.assertIn("NFLTR_KEY", str(e))
        self.assertIn("nfltr keys create", str(e))

    def test_keyNotInRepr(self) -> None:
        """
        The settings' repr never shows the key.
        """
        settings = relay_settings(values(), environ={})
        self.assertNotIn(KEY, repr(settings))

    def test_trustRequired(self) -> None:
        """
        Neither C{--ca} nor C{--relay-pin}: an error that names both and
        where to find them.
        """
        e = self.assertRaises(ConfigError, relay_settings, values(relay_pin=None), {})
        for word in ("--ca", "--relay-pin", "relay.json", "fingerprint"):
            self.assertIn(word, str(e))

    def test_trustExclusive(self) -> None:
        """
        Both C{--ca} and C{--relay-pin}: an error.
        """
        e = self.assertRaises(ConfigError, relay_settings, values(ca="x.pem"), {})
        self.assertIn("not both", str(e))

    def test_badPin(self) -> None:
        """
        A pin that is not a fingerprint: the fingerprint format's message.
        """
        e = self.assertRaises(ConfigError, relay_settings, values(relay_pin="abc"), {})
        self.assertIn("invalid fingerprint 'abc'", str(e))

    def test_pinForms(self) -> None:
        """
        A pin typed with colons and upper case is read as the canonical
        fingerprint.
        """
        typed = "SHA256:" + ":".join(["AB"] * 32)
        self.assertEqual(relay_settings(values(relay_pin=typed), {}).pin, PIN)

    def test_caFile(self) -> None:
        """
        C{--ca} takes a CA file, kept as an absolute path for the connect
        command; a missing file is an error naming it.
        """
        pki = ensure_relay_pki(self.mktemp(), ["relay.example"])
        relative = os.path.relpath(pki.ca_cert)
        settings = relay_settings(values(relay_pin=None, ca=relative), {})
        absolute = os.path.abspath(pki.ca_cert)
        self.assertEqual(settings.ca, absolute)
        self.assertEqual(settings.trust_arguments(), f"--ca {absolute}")
        e = self.assertRaises(
            ConfigError, relay_settings, values(relay_pin=None, ca="/nonexistent.pem"), {}
        )
        self.assertIn("/nonexistent.pem", str(e))

    def test_badKeepalive(self) -> None:
        """
        An unknown keepalive preset is an error naming the presets.
        """
        e = self.assertRaises(ConfigError, relay_settings, values(keepalive="sometimes"), {})
        self.assertIn("mobile", str(e))
        self.assertEqual(
            relay_settings(values(keepalive="mobile"), {}).keepalive, PRESETS["mobile"]
        )

    def test_address(self) -> None:
        """
        C{--relay} takes HOST:PORT, [v6]:PORT; a missing or bad port is an
        error.
        """
        self.assertEqual(relay_settings(values(relay="r.example:443"), {}).port, 443)
        v6 = relay_settings(values(relay="[::1]:9000"), {})
        self.assertEqual((v6.host, v6.port, v6.address), ("::1", 9000, "[::1]:9000"))
        for bad in ("r.example", "r.example:0", "r.example:70000", "r.example:x"):
            self.assertRaises(ConfigError, relay_settings, values(relay=bad), {})

    def test_endpoint(self) -> None:
        """
        With C{--transport link} the endpoint is TLS over a
        C{HostnameEndpoint} to the relay; by default (auto) the raw link
        comes first and WebSocket second, over the same TLS endpoint;
        C{websocket} uses WebSocket only.
        """
        from nfltr.ws.client import WebSocketLinkEndpoint
        from nfltr.ws.endpoints import AutoEndpoint

        settings = relay_settings(values(relay="r.example:444", transport="link"), {})
        endpoint = settings.endpoint(MemoryReactorClock()).order[0][1]
        assert isinstance(endpoint, TLSClientEndpoint)
        inner = endpoint.endpoint
        assert isinstance(inner, HostnameEndpoint)
        self.assertEqual((inner._hostText, inner._port), ("r.example", 444))
        auto = relay_settings(values(relay="r.example:444"), {}).endpoint(MemoryReactorClock())
        first = auto.order[0][1]
        assert isinstance(first, AutoEndpoint)
        link, websocket = first.endpoints
        self.assertIs(websocket.stream, link)
        self.assertEqual(websocket.url, "wss://r.example:444/link")
        ws = relay_settings(values(relay="r.example:444", transport="websocket"), {})
        self.assertIsInstance(ws.endpoint(MemoryReactorClock()).order[0][1], WebSocketLinkEndpoint)

    def test_several(self) -> None:
        """
        C{--relay} takes several addresses separated by commas (replicas):
        the endpoint holds each, over TLS checked for its own host name and
        in WebSocket too, shuffled by the given generator; an address
        given twice, a bad one among them, or more than L{MAX_RELAYS} are
        refused.
        """
        from nfltr.agent import MAX_RELAYS
        from nfltr.ws.client import WebSocketLinkEndpoint

        text = "a.example:1, b.example:2,[::1]:3"
        settings = relay_settings(values(relay=text, transport="websocket"), {})
        self.assertEqual(settings.address, "a.example:1,b.example:2,[::1]:3")
        self.assertEqual(settings.others, (("b.example", 2), ("::1", 3)))
        endpoint = settings.endpoint(MemoryReactorClock(), random.Random(7))
        wheres = sorted(where for where, _ in endpoint.order)
        self.assertEqual(wheres, ["[::1]:3", "a.example:1", "b.example:2"])
        urls = {e.url for _, e in endpoint.order if isinstance(e, WebSocketLinkEndpoint)}
        self.assertEqual(len(urls), 3)
        self.assertLessEqual({"wss://a.example:1/link", "wss://b.example:2/link"}, urls)
        many = ",".join(f"r{i}.example:1" for i in range(MAX_RELAYS + 1))
        for bad in ("a.example:1,a.example:1", "a.example:1,b.example", many, "a.example:1,"):
            self.assertRaises(ConfigError, relay_settings, values(relay=bad), {})

    def test_transportAndProxy(self) -> None:
        """
        A bad transport or proxy is refused; HTTPS_PROXY is read when
        C{--proxy} is not given.
        """
        self.assertRaises(ConfigError, relay_settings, values(transport="udp"), {})
        self.assertRaises(ConfigError, relay_settings, values(proxy="socks5://p:1"), {})
        self.assertEqual(relay_settings(values(proxy="http://p.example:3128"), {}).proxy,
                         ("p.example", 3128))
        self.assertEqual(relay_settings(values(), {"HTTPS_PROXY": "http://q:8080/"}).proxy,
                         ("q", 8080))


class AddressTests(SynchronousTestCase):
    """
    L{parse_address} and L{parse_bool}.
    """

    def test_listenForms(self) -> None:
        """
        A port alone takes the default host; port 0 is allowed only when
        asked for.
        """
        self.assertEqual(
            parse_address("0", "--listen", default_host="127.0.0.1", allow_zero=True),
            ("127.0.0.1", 0),
        )
        self.assertEqual(
            parse_address("[::1]:22", "--listen", default_host="127.0.0.1"), ("::1", 22)
        )
        e = self.assertRaises(ConfigError, parse_address, "h:0", "--relay")
        self.assertIn("--relay 'h:0'", str(e))

    def test_bool(self) -> None:
        """
        true/false and their usual spellings; anything else is an error.
        """
        for text in ("true", "TRUE", "yes", "on", "1"):
            self.assertIs(parse_bool(text, "--e2ee"), True)
        for text in ("false", "No", "off", "0"):
            self.assertIs(parse_bool(text, "--e2ee"), False)
        e = self.assertRaises(ConfigError, parse_bool, "maybe", "--e2ee")
        self.assertIn("--e2ee 'maybe'", str(e))


class AgentOptionsTests(SynchronousTestCase):
    """
    L{agent_options}.
    """

    def test_ok(self) -> None:
        """
        Ports, name, e2ee and state directory are read; e2ee is on by
        default.
        """
        options = agent_options(["22", "8080"], values(name="box", state_dir="s"), {})
        self.assertEqual(options.ports, (22, 8080))
        self.assertEqual(options.name, "box")
        self.assertTrue(options.e2ee)
        self.assertEqual(options.state_dir, Path("s").absolute())
        self.assertFalse(agent_options(["22"], values(e2ee="false"), {}).e2ee)

    def test_ticketLifetime(self) -> None:
        """
        C{--tls-ticket-lifetime} is whole seconds from 0 (no resumption) to
        a day, an hour by default; anything else is an error naming it.
        """
        self.assertEqual(agent_options(["22"], values(), {}).ticket_lifetime, TICKET_LIFETIME)
        for text, seconds in (("0", 0), ("60", 60), ("86400", 86400)):
            options = agent_options(["22"], values(tls_ticket_lifetime=text), {})
            self.assertEqual(options.ticket_lifetime, seconds)
        for text in ("-1", "1.5", "86401", "x", ""):
            e = self.assertRaises(ConfigError, agent_options, ["22"],
                                  values(tls_ticket_lifetime=text), {})
            self.assertIn("--tls-ticket-lifetime", str(e))

    def test_resumingTunnel(self) -> None:
        """
        The agent's end-to-end tunnel resumes unless the lifetime is 0.
        """
        resuming = prepare_agent(agent_options(["22"], values(state_dir=self.mktemp()), {}))
        self.assertIsInstance(resuming.server_tls, ResumingServerTLS)
        plain = prepare_agent(agent_options(
            ["22"], values(state_dir=self.mktemp(), tls_ticket_lifetime="0"), {}))
        self.assertIsInstance(plain.server_tls, ServerTLS)

    def test_defaultStateDir(self) -> None:
        """
        The state directory defaults under C{XDG_STATE_HOME}.
        """
        options = agent_options(["22"], values(), {"XDG_STATE_HOME": "/xdg"})
        self.assertEqual(options.state_dir, Path("/xdg/nfltr/agent"))

    def test_errors(self) -> None:
        """
        No port, a bad port, a repeated port, a bad name and a bad e2ee
        value are each an error that says so.
        """
        cases = [
            ([], values(), "give the port"),
            (["x"], values(), "invalid port"),
            (["0"], values(), "invalid port"),
            (["22", "22"], values(), "twice"),
            (["22"], values(name="Bad_Name"), "invalid agent name"),
            (["22"], values(e2ee="maybe"), "--e2ee"),
        ]
        for ports, vals, text in cases:
            e = self.assertRaises(ConfigError, agent_options, ports, vals, {})
            self.assertIn(text, str(e))


class ConnectOptionsTests(SynchronousTestCase):
    """
    L{connect_options}.
    """

    def test_ok(self) -> None:
        """
        Agent, port, listening address (127.0.0.1:0 by default) and the pin
        are read; the agent's TLS is pinned.
        """
        options = connect_options("box", "22", values(pin=PIN), {})
        self.assertEqual((options.agent, options.port), ("box", 22))
        self.assertEqual((options.listen_host, options.listen_port), ("127.0.0.1", 0))
        assert options.agent_tls is not None
        self.assertEqual(options.agent_tls.pin, PIN)
        self.assertEqual(options.agent_tls.role, "agent")
        listen = connect_options("box", "22", values(pin=PIN, listen="2222"), {})
        self.assertEqual(listen.listen_address, "127.0.0.1:2222")

    def test_resume(self) -> None:
        """
        The agent's TLS keeps and offers its last session unless
        C{--resume false}; a bad value is an error naming the option.
        """
        resuming = connect_options("box", "22", values(pin=PIN), {}).agent_tls
        assert resuming is not None
        self.assertIsNotNone(resuming.sessions)
        plain = connect_options("box", "22", values(pin=PIN, resume="false"), {}).agent_tls
        assert plain is not None
        self.assertIsNone(plain.sessions)
        e = self.assertRaises(ConfigError, connect_options, "box", "22",
                              values(pin=PIN, resume="maybe"), {})
        self.assertIn("--resume", str(e))

    def test_pinRequired(self) -> None:
        """
        End to end without C{--pin}: an error that says the agent prints
        it.
        """
        e = self.assertRaises(ConfigError, connect_options, "box", "22", values(), {})
        self.assertIn("--pin is required", str(e))
        self.assertIn("the agent prints its fingerprint", str(e))

    def test_plain(self) -> None:
        """
        With C{--e2ee false} no pin is needed, and one given is an error.
        """
        self.assertIsNone(connect_options("box", "22", values(e2ee="false"), {}).agent_tls)
        self.assertRaises(
            ConfigError, connect_options, "box", "22", values(e2ee="false", pin=PIN), {}
        )

    def test_errors(self) -> None:
        """
        A bad agent name, port, pin or listening address is an error.
        """
        for agent, port, vals in [
            ("Box!", "22", values(pin=PIN)),
            ("box", "0", values(pin=PIN)),
            ("box", "22", values(pin="nope")),
            ("box", "22", values(pin=PIN, listen="1.2.3.4:x")),
        ]:
            self.assertRaises(ConfigError, connect_options, agent, port, vals, {})
