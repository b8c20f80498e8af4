"""
Each tool of L{bench.peers.adapters} starts in front of real services, a
request goes through it, and it stops without leaving a process; a tool
that is not installed is skipped, saying why.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from twisted.trial.unittest import SkipTest, SynchronousTestCase

from bench._stack import Processes, Services
from bench.peers.accounting import table, tree
from bench.peers.adapters import TLS_HOST, TOOLS, Tool, get
from bench.peers.loads import Load

SERVICES = ("iperf3", "nginx", "setpriv", "openssl")


class AdapterTests(SynchronousTestCase):
    """
    One test per tool, each with its own services.
    """

    def setUp(self) -> None:
        absent = [p for p in SERVICES if shutil.which(p) is None]
        if absent:
            raise SkipTest(f"not installed: {', '.join(absent)}")
        self.tmp = Path(self.mktemp()).resolve()
        self.tmp.mkdir(parents=True)
        procs = Processes()
        self.addCleanup(procs.stop_all)
        self.services = Services(self.tmp, procs, 1, [TLS_HOST, "localhost"])

    def roundTrip(self, name: str, restart: bool = False) -> Tool:
        """
        Start the tool, GET the 1 KiB file through it (and a few bytes of
        iperf3's port where it carries bulk), check its roles, maybe restart
        its relay, and stop it: no process of it is left.
        """
        tool_class = TOOLS[name]
        why = tool_class.missing()
        if why:
            raise SkipTest(f"{name}: {why}")
        tool = tool_class(self.tmp / name, self.services)
        pids: set[int] = set()
        try:
            endpoints = tool.start()
            body = get(endpoints["nginx"])
            self.assertEqual(body, self.services.nginx.body("1k"))
            self.assertEqual("iperf3" in endpoints, "bulk" in tool.kinds)
            self.assertEqual(set(endpoints), {Load.parse("http-1").service} | (
                {"iperf3"} if "bulk" in tool.kinds else set()
            ))
            roles = tool.roles()
            pids = tree(table(), [pid for roots in roles.values() for pid in roots])
            if restart:
                times = tool.restart_relay()
                self.assertLessEqual(times["start_to_listening"], times["start_to_request"])
                self.assertEqual(get(endpoints["nginx"]), body)
                pids |= set(tool.roles()["relay"])
            tool.check()
        finally:
            tool.stop()
        # Forked helpers (socat's, sshd's) get their SIGTERM with their group
        # and may take a moment to be gone.
        deadline = time.monotonic() + 10
        while any(os.path.exists(f"/proc/{pid}") for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in pids:
            self.assertFalse(os.path.exists(f"/proc/{pid}"), f"{name}: {pid} is left")
        return tool

    def test_direct(self) -> None:
        """
        Direct: no tool process, no roles; the service answers.
        """
        tool = self.roundTrip("direct")
        self.assertEqual(tool.roles(), {})

    def test_directTls(self) -> None:
        """
        direct-tls: starts, carries a request, and stops leaving no process.
        """
        self.roundTrip("direct-tls")

    def test_nfltrPlain(self) -> None:
        """
        The plain tunnel's relay, agent and connectors are its roles; its
        relay restarts on the same port.
        """
        tool = self.roundTrip("nfltr-plain", restart=True)
        self.assertEqual(sorted(tool.role_procs), ["connector", "exposer", "relay"])
        self.assertEqual(len(tool.role_procs["connector"]), 2)

    def test_nfltrE2ee(self) -> None:
        """
        nfltr-e2ee: starts, carries a request, and stops leaving no process.
        """
        self.roundTrip("nfltr-e2ee")

    def test_nfltrE2eeFull(self) -> None:
        """
        nfltr-e2ee-full (resumption off on both ends): starts, carries a
        request, and stops leaving no process; its agent and connectors were
        given the options that turn resumption off.
        """
        tool = self.roundTrip("nfltr-e2ee-full")
        commands = [" ".join(p.popen.args) for procs in tool.role_procs.values() for p in procs]
        self.assertTrue(any("--tls-ticket-lifetime 0" in c for c in commands), commands)
        self.assertTrue(any("--resume false" in c for c in commands), commands)

    def test_nfltrE2eeNoResume(self) -> None:
        """
        nfltr-e2ee-noresume (no resumable sessions): starts, carries a
        request, and stops leaving no process; its agent and connectors were
        given C{--resume-timeout 0}.
        """
        tool = self.roundTrip("nfltr-e2ee-noresume")
        commands = [" ".join(p.popen.args) for procs in tool.role_procs.values() for p in procs]
        self.assertEqual(sum("--resume-timeout 0" in c for c in commands), 3, commands)

    def test_shareE2ee(self) -> None:
        """
        share-e2ee: starts, carries a request, and stops leaving no process.
        """
        self.roundTrip("share-e2ee")

    def test_shareInspect(self) -> None:
        """
        share-inspect: starts, carries a request, and stops leaving no process.
        """
        self.roundTrip("share-inspect")

    def test_sharePassthrough(self) -> None:
        """
        share-passthrough: starts, carries a request, and stops leaving no process.
        """
        self.roundTrip("share-passthrough")

    def test_ssh(self) -> None:
        """
        sshd's per-connection processes are in the relay's tree, and gone
        after the stop.
        """
        self.roundTrip("ssh")

    def test_nfltrSsh(self) -> None:
        """
        nfltr-ssh: starts, carries a request, and stops leaving no process.
        """
        self.roundTrip("nfltr-ssh")

    def test_pagekite(self) -> None:
        """
        pagekite: starts, carries a request, and stops leaving no process.
        """
        self.roundTrip("pagekite")

    def test_socat(self) -> None:
        """
        socat: starts, carries a request, and stops leaving no process.
        """
        self.roundTrip("socat")

    def test_haproxy(self) -> None:
        """
        haproxy: starts, carries a request, and stops leaving no process.
        """
        self.roundTrip("haproxy")

    def test_everyToolTested(self) -> None:
        """
        A new adapter gets a test here too.
        """
        tested = {
            name.removeprefix("test_").lower() for name in dir(self) if name.startswith("test_")
        }
        for name in TOOLS:
            self.assertIn(name.replace("-", "").lower(), tested)
