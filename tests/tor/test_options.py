"""
The Tor options: the relay's (L{nfltr.cli.tor_options}, through
L{nfltr.cli.relay_options.RelayOptions}), C{--tor} of agents and connectors
(L{nfltr.agent.relay_settings}), and the commands and targets the relay gives
tor (L{nfltr.tor.add_onion_command}, L{nfltr.relay.onion}).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twisted.internet.address import IPv4Address, IPv6Address, UNIXAddress
from twisted.internet.testing import MemoryReactorClock
from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent import ConfigError, relay_settings
from nfltr.cli.relay_options import RelayOptions
from nfltr.relay.config import RelayConfig
from nfltr.relay.onion import RelayOnion, local_target
from nfltr.tls import TLSClientEndpoint
from nfltr.tor import (
    LAUNCH,
    OnionConfig,
    OnionKey,
    TorEndpoint,
    TorOptionError,
    UploadRound,
    add_onion_command,
    new_client_keys,
    socks_endpoint_text,
)

PIN = "sha256:" + "ab" * 32


def relay_options(*args: str) -> RelayOptions:
    """
    The relay's options parsed from C{args} (and a data directory).
    """
    options = RelayOptions()
    options.parseOptions(["--data-dir", "/d", *args])
    return options


class RelayTorOptionsTests(SynchronousTestCase):
    """
    C{--onion} and its companions.
    """

    def test_none(self) -> None:
        """
        Without C{--onion} there is no onion service.
        """
        config = relay_options().config
        assert config is not None
        self.assertIsNone(config.onion)

    def test_onion(self) -> None:
        """
        C{--onion PORT} with its companions makes the onion service's settings; tor is
        launched unless C{--tor-control} names one.
        """
        keys = Path(self.mktemp())
        client = new_client_keys()
        keys.write_text(f"descriptor:x25519:{client.public}\n")
        config = relay_options(
            "--onion", "443", "--ssh", "tcp:0", "--onion-ssh", "22", "--onion-timeout", "60",
            "--tor-control", "unix:/run/tor/control", "--onion-client-keys", str(keys),
        ).config
        assert config is not None
        self.assertEqual(config.onion, OnionConfig(
            tls_port=443, ssh_port=22, control="unix:/run/tor/control", timeout=60.0,
            client_keys=(client.public,),
        ))
        launched = relay_options("--onion", "443").config
        assert launched is not None and launched.onion is not None
        self.assertEqual(launched.onion.control, LAUNCH)

    def test_errors(self) -> None:
        """
        Bad values, and options that need C{--onion} (or C{--ssh}) without it, are errors
        naming the option.
        """
        for args, named in [
            (["--onion", "0"], "--onion"),
            (["--onion", "http"], "--onion"),
            (["--onion-ssh", "22", "--ssh", "tcp:0"], "--onion-ssh"),
            (["--onion", "443", "--onion-ssh", "22"], "--onion-ssh"),
            (["--share-domain", "onion"], "--share-domain"),
            (["--onion", "443", "--tor-control", "carrier:pigeon"], "--tor-control"),
            (["--onion", "443", "--onion-timeout", "0"], "--onion-timeout"),
            (["--onion", "443", "--onion-client-keys", "/absent"], "--onion-client-keys"),
            (["--tls", "onion:443"], "--onion PORT"),
            (["--ssh", "onion:22:controlPort=9051"], "--onion-ssh PORT"),
        ]:
            with self.assertRaises(usage.UsageError) as caught:
                relay_options(*args)
            self.assertIn(named, str(caught.exception), args)


def settings_values(**kw: Any) -> dict[str, Any]:
    """
    Agent relay options with a pin and a key, overridden by C{kw}.
    """
    return {"relay-pin": PIN, "key": "k", **kw}


class AgentTorOptionTests(SynchronousTestCase):
    """
    C{--tor} of agents and connectors.
    """

    def test_socksForms(self) -> None:
        """
        A port, C{HOST:PORT} and endpoint strings name a SOCKS port; C{launch} launches.
        """
        self.assertEqual(socks_endpoint_text("9050"), "tcp:127.0.0.1:9050")
        self.assertEqual(socks_endpoint_text("10.0.0.1:9150"), "tcp:10.0.0.1:9150")
        self.assertEqual(socks_endpoint_text("unix:/run/tor/socks"), "unix:/run/tor/socks")
        self.assertEqual(socks_endpoint_text(" Launch "), LAUNCH)
        for bad in ("", "socks", "70000", "host:", "tcp:"):
            self.assertRaises(TorOptionError, socks_endpoint_text, bad)

    def test_endpoint(self) -> None:
        """
        With C{--tor} the links go through a L{TorEndpoint} to the relay's host and port,
        under the same TLS as without.
        """
        onion = OnionKey(bytes(32)).address
        settings = relay_settings(
            settings_values(relay=f"{onion}:443", tor="9050", transport="link"), {},
        )
        self.assertEqual(settings.tor, "tcp:127.0.0.1:9050")
        link = settings.endpoint(MemoryReactorClock()).order[0][1]
        assert isinstance(link, TLSClientEndpoint)
        tcp = link.endpoint
        self.assertIsInstance(tcp, TorEndpoint)
        self.assertEqual((tcp.host, tcp.port, tcp.socks), (onion, 443, "tcp:127.0.0.1:9050"))
        launch = relay_settings(settings_values(relay=f"{onion}:443", tor="launch"), {})
        self.assertIsNotNone(launch.launcher)

    def test_errors(self) -> None:
        """
        An onion relay without C{--tor}, C{--tor} with C{--proxy}, and a bad C{--tor} are
        errors that say what to give.
        """
        onion = OnionKey(bytes(32)).address
        with self.assertRaises(ConfigError) as caught:
            relay_settings(settings_values(relay=f"{onion}:443"), {})
        self.assertIn("--tor", str(caught.exception))
        self.assertRaises(ConfigError, relay_settings,
                          settings_values(tor="9050", proxy="http://p:3128"), {})
        self.assertRaises(ConfigError, relay_settings, settings_values(tor="nine"), {})


class OnionCommandTests(SynchronousTestCase):
    """
    What the relay tells tor.
    """

    def test_addOnion(self) -> None:
        """
        C{ADD_ONION} carries the key, a C{Port} per mapping and, with client keys, the
        C{V3Auth} flag and a C{ClientAuthV3} per key.
        """
        key = OnionKey(bytes(range(32)))
        plain = add_onion_command(key, [(443, "127.0.0.1:8443"), (22, "unix:/s")])
        self.assertEqual(
            plain, f"ADD_ONION {key.control_blob()} Port=443,127.0.0.1:8443 Port=22,unix:/s",
        )
        authed = add_onion_command(key, [(443, "127.0.0.1:8443")], ["AAAA", "BBBB"])
        self.assertEqual(
            authed, f"ADD_ONION {key.control_blob()} Flags=V3Auth Port=443,127.0.0.1:8443 "
                    "ClientAuthV3=AAAA ClientAuthV3=BBBB",
        )

    def test_uploadRound(self) -> None:
        """
        The service is up once every directory of the first round of uploads answered, one
        at least with success; events of other services, and later rounds, do not count.
        """
        uploads = UploadRound("abc")
        events = [
            ("UPLOAD abc UNKNOWN $D1 blinded1", False),
            ("UPLOAD abc UNKNOWN $D2 blinded1", False),
            ("UPLOADED other UNKNOWN $D1", False),
            ("FAILED abc UNKNOWN $D1 REASON=UPLOAD_REJECTED", False),
            ("UPLOAD abc UNKNOWN $D3 blinded2", False),
            ("UPLOADED abc UNKNOWN $D2", True),
        ]
        for text, up in events:
            self.assertEqual(uploads.event(text), up, text)
        failed = UploadRound("abc")
        failed.event("UPLOAD abc UNKNOWN $D1 x")
        self.assertFalse(failed.event("FAILED abc UNKNOWN $D1 REASON=x"))

    def test_uploadNeverAnswered(self) -> None:
        """
        A directory of the first round that never answers (tor started the next round on a
        new consensus instead) does not keep a service that one directory took from being
        up for ever: the next round's start ends the wait.  Until then the directories still
        waited for are named, for the error of an attempt that ran out of time.
        """
        uploads = UploadRound("abc")
        for text in ("UPLOAD abc UNKNOWN $D1 b1", "UPLOAD abc UNKNOWN $D2 b1"):
            self.assertFalse(uploads.event(text))
        self.assertFalse(uploads.event("UPLOADED abc UNKNOWN $D1"))
        self.assertEqual(uploads.describe(), "1 of 2 directories answered, 1 took it; "
                                             "waiting for $D2")
        self.assertTrue(uploads.event("UPLOAD abc UNKNOWN $D1 b2"))
        nothing = UploadRound("abc")
        self.assertEqual(nothing.describe(), "no upload started")
        nothing.event("UPLOAD abc UNKNOWN $D1 b1")
        nothing.event("FAILED abc UNKNOWN $D1 REASON=x")
        self.assertFalse(nothing.event("UPLOAD abc UNKNOWN $D1 b2"), "none took it yet")

    def test_localTarget(self) -> None:
        """
        A wildcard address is reached on loopback; others as bound; UNIX sockets by path.
        """
        self.assertEqual(local_target(IPv4Address("TCP", "0.0.0.0", 8443)), "127.0.0.1:8443")
        self.assertEqual(local_target(IPv4Address("TCP", "10.1.2.3", 1)), "10.1.2.3:1")
        self.assertEqual(local_target(IPv6Address("TCP", "::", 2222)), "[::1]:2222")
        self.assertEqual(local_target(UNIXAddress(b"/run/tls")), "unix:/run/tls")

    def test_effective(self) -> None:
        """
        The relay's names gain the onion address (after the first name, C{localhost} if
        none); C{--share-domain onion} becomes the onion address, another stays.
        """
        key = OnionKey(bytes(32))
        onion = RelayOnion(OnionConfig(443), key, Path("/d"), MemoryReactorClock())
        bare = onion.effective(RelayConfig(Path("/d"), share_domain="onion"))
        self.assertEqual(bare.names, ("localhost", key.address))
        self.assertEqual(bare.share_domain, key.address)
        named = onion.effective(RelayConfig(Path("/d"), names=("r.example",)))
        self.assertEqual(named.names, ("r.example", key.address))
        self.assertEqual(onion.effective(named), named)
        self.assertEqual(named.share_domain, "localhost")
