"""
C{nfltr up FILE} with real processes: one agent, one link, serving every
entry of a config file, reached with C{nfltr tcp-connect} and curl.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import socket
import stat
import subprocess
import threading
import time
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from .harness import REPO, Process, Stack, StackTestCase, exchange, missing, nfltr
from .service import pattern
from .test_faults import poll_until
from .test_public_ports import free_ports
from .test_udp import dns_query, free_udp_port, udp_service
from .udp_service import ADDRESS, NAME
from .web_service import pattern as web_pattern

CURL_TIMEOUT = 60


def write_config(stack: Stack, key: str, body: str, name: str = "nfltr.toml") -> Path:
    """
    A config file for C{stack}'s relay (its key in a key file beside it),
    with the entries C{body}.
    """
    key_file = stack.tmp / "key"
    key_file.write_text(key + "\n")
    key_file.chmod(0o600)
    path = stack.tmp / name
    path.write_text(
        f'relay = "{stack.address}"\nca = "{stack.ca}"\nkey-file = "key"\n'
        f'name = "box"\nstate-dir = "state"\n\n{body}'
    )
    return path


def tcp_entries(ports: list[int]) -> str:
    return "".join(f"[[tcp]]\nport = {port}\n\n" for port in ports)


def http_entry(name: str, port: int, mode: str) -> str:
    return f'[[http]]\nname = "{name}"\nport = {port}\nmode = "{mode}"\n\n'


def curl_command(stack: Stack, url: str, *extra: str) -> list[str]:
    """
    curl's command to GET C{url} (a share's, with its path) through the
    relay, trusting its share CA.
    """
    host, port = url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)
    return ["curl", "--silent", "--show-error", "--fail", "--cacert",
            str(stack.data / "tls" / "share-ca.crt"), "--resolve", f"{host}:{port}:127.0.0.1",
            *extra, url]


def curl(stack: Stack, url: str, *extra: str) -> subprocess.CompletedProcess[bytes]:
    """
    GET C{url}C{headers} (a share's) through the relay.
    """
    return subprocess.run(curl_command(stack, url + "headers", *extra), capture_output=True,
                          timeout=CURL_TIMEOUT, check=False)


def start_up(stack: Stack, path: Path, *extra: str) -> Process:
    """
    Start C{nfltr up FILE}.
    """
    return stack.start(nfltr("up", str(path), *extra), "up")


class UpTests(StackTestCase):
    """
    One agent for three TCP entries, two share URLs and a UDP entry.
    """

    skip = missing("curl")

    def test_manyEntries(self) -> None:
        """
        Every entry is served by the one agent: each TCP port through
        tcp-connect (pinning the agent's one key, or plain for the entry
        with e2ee false), each share URL with curl; the agent dialled the
        relay once; the UDP entry's DNS server answers through udp-connect.
        """
        key = self.stack.key("alice")
        tcp = [self.stack.service() for _ in range(3)]
        web = [self.stack.web_service() for _ in range(2)]
        dns = udp_service(self.stack, "dns")
        # The third TCP entry is plain (e2ee = false): the relay may read it.
        path = write_config(self.stack, key, tcp_entries(tcp[:2]) + f"[[tcp]]\nport = {tcp[2]}\n"
                            "e2ee = false\n\n" + http_entry("site-a", web[0], "e2ee")
                            + http_entry("site-b", web[1], "inspect")
                            + f"[[udp]]\nport = {dns}\n")
        self.assertEqual(
            subprocess.run(nfltr("check", str(path)), capture_output=True, check=False,
                           timeout=CURL_TIMEOUT).returncode, 0,
        )
        agent = start_up(self.stack, path)
        fingerprint = agent.wait_for(r"(sha256:[0-9a-f]{64})").group(1)
        urls = {agent.wait_for(rf"share (https://site-{x}\S+) ").group(1) for x in "ab"}
        agent.wait_for(rf"connect to port {tcp[2]} .* --e2ee false ")
        for port, mode in zip(tcp, [("--pin", fingerprint)] * 2 + [("--e2ee", "false")],
                              strict=True):
            _, local = self.stack.connector(key, "box", port, *mode)
            self.assertEqual(exchange(local, b"MARKER ok\n"), b"ok\n")
        for url in sorted(urls):
            done = curl(self.stack, url)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertIn(b"GET /headers", done.stdout)
        agent.wait_for(rf"nfltr udp-connect box {dns} ")
        client = self.stack.start(
            nfltr("udp-connect", "box", str(dns), *self.stack.relay_args()), "udp-connect",
            {"NFLTR_KEY": key},
        )
        local = int(client.wait_for(r"listening on [\d.]+:(\d+) \(UDP\)").group(1))
        self.assertEqual([a.payload.dottedQuad() for a in dns_query(local, NAME).answers],
                         [ADDRESS])
        self.assertEqual(self.stack.relay.output().count("agent box (account alice) connected"),
                         1)

    def test_example(self) -> None:
        """
        docs/nfltr.example.toml runs, its relay and trust set to this
        relay's: the agent announces both TCP ports, both share URLs and
        the UDP port.
        """
        stack = self.stack
        text = (REPO / "docs" / "nfltr.example.toml").read_text()
        text = re.sub(r'(?m)^relay = ".*"$', f'relay = "{stack.address}"', text)
        text = re.sub(r'(?m)^relay-pin = ".*"$', f'relay-pin = "{stack.info["fingerprint"]}"',
                      text)
        path = stack.tmp / "example.toml"
        path.write_text(text)
        for name, secret in (("nfltr.key", stack.key("alice")), ("hooks.header", "X-Hook: a")):
            (stack.tmp / name).write_text(secret + "\n")
            (stack.tmp / name).chmod(0o600)
        agent = start_up(stack, path)
        for pattern_ in (r"connect to port 22 ", r"connect to port 5432 ",
                         r"share https://blog\.", r"share https://hooks\.",
                         r"connect to UDP port 53 "):
            agent.wait_for(pattern_)

    def test_brokenFile(self) -> None:
        """
        C{nfltr up} on a broken file exits 2 naming the line.
        """
        path = write_config(self.stack, "k", "[[tcp]]\nport = 0\n")
        done = subprocess.run(nfltr("up", str(path)), capture_output=True, text=True,
                              check=False, timeout=CURL_TIMEOUT)
        self.assertEqual(done.returncode, 2)
        self.assertIn(f"{path}:8: [[tcp]] 1: port 0", done.stderr)


class LoginTests(StackTestCase):
    """
    C{nfltr login} against a real relay, then the agent commands with no
    relay, trust or key on their command lines.
    """

    skip = missing("curl")

    def login(self, *args: str, answer: str = "y\n",
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            nfltr("login", self.stack.address, *args), input=answer, capture_output=True,
            text=True, timeout=CURL_TIMEOUT, check=False,
            env={**os.environ, "XDG_CONFIG_HOME": str(self.config), **(env or {})},
        )

    def setUp(self) -> None:
        super().setUp()
        self.config = self.stack.tmp / "config"

    def test_loginThenCommands(self) -> None:
        """
        login shows the relay's fingerprint (the one it printed) and, once
        confirmed, saves it and the key 0600; then nfltr tcp, tcp-connect
        and http work with nothing but their own options.
        """
        key = self.stack.key("alice")
        done = self.login(answer="n\n", env={"NFLTR_KEY": key})
        self.assertEqual(done.returncode, 1)
        self.assertFalse((self.config / "nfltr" / "nfltr.toml").exists())
        done = self.login(env={"NFLTR_KEY": key})
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn(self.stack.info["fingerprint"], done.stdout)
        saved = self.config / "nfltr" / "nfltr.toml"
        self.assertEqual(stat.S_IMODE(saved.stat().st_mode), 0o600)
        env = {"XDG_CONFIG_HOME": str(self.config)}
        service = self.stack.service()
        agent = self.stack.start(
            nfltr("tcp", str(service), "--name", "box", "--state-dir",
                  str(self.stack.tmp / "box")), "agent", env)
        fingerprint = agent.wait_for(r"(sha256:[0-9a-f]{64})").group(1)
        client = self.stack.start(
            nfltr("tcp-connect", "box", str(service), "--listen", "127.0.0.1:0",
                  "--pin", fingerprint), "client", env)
        local = int(client.wait_for(r"listening on [\d.]+:(\d+)").group(1))
        self.assertEqual(exchange(local, b"MARKER in\n"), b"in\n")
        web = self.stack.start(
            nfltr("http", str(self.stack.web_service()), "--name", "site", "--state-dir",
                  str(self.stack.tmp / "site")), "http", env)
        done_curl = curl(self.stack, web.wait_for(r"share (https://\S+) ").group(1))
        self.assertEqual(done_curl.returncode, 0, done_curl.stderr)

    def test_badKeyNotSaved(self) -> None:
        """
        A key the relay does not know is not saved: login says why; a pin
        that is not the relay's neither.
        """
        self.stack.key("alice")
        done = self.login(env={"NFLTR_KEY": "nfk_not-a-key"})
        self.assertEqual(done.returncode, 1, done.stdout)
        self.assertIn("not saved: relay refused", done.stderr)
        self.assertNotIn("nfk_not-a-key", done.stdout + done.stderr)
        done = self.login("--relay-pin", "sha256:" + "0" * 64, env={"NFLTR_KEY": "x"})
        self.assertEqual(done.returncode, 1, done.stdout)
        self.assertIn("not saved:", done.stderr)
        self.assertFalse((self.config / "nfltr" / "nfltr.toml").exists())

    def test_givenPinAndKeyFile(self) -> None:
        """
        With --relay-pin and --key-file nothing is asked, and the key
        file's path is saved; a command line's own options win over the
        login (its --ca over a saved pin made wrong).
        """
        key = self.stack.key("alice")
        key_file = self.stack.tmp / "key"
        key_file.write_text(key)
        key_file.chmod(0o600)
        done = self.login("--relay-pin", self.stack.info["fingerprint"], "--key-file",
                          str(key_file), answer="")
        self.assertEqual(done.returncode, 0, done.stderr)
        saved = self.config / "nfltr" / "nfltr.toml"
        # The saved pin made wrong: the command line's --ca wins over it.
        saved.write_text(re.sub(r"sha256:[0-9a-f]{64}", "sha256:" + "0" * 64,
                                saved.read_text()))
        env = {"XDG_CONFIG_HOME": str(self.config)}
        service = self.stack.service()
        agent = self.stack.start(
            nfltr("tcp", str(service), "--name", "box", "--state-dir", str(self.stack.tmp / "b"),
                  "--ca", self.stack.ca), "agent", env)
        agent.wait_for(r"(sha256:[0-9a-f]{64})")
        agent.wait_for(r"online|connected|welcome")


def wait_count(process: Process, pattern: str, count: int,
               timeout: float = CURL_TIMEOUT) -> None:
    """
    Wait until C{process} printed C{count} lines matching C{pattern}.
    """
    regex = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while sum(1 for line in list(process.lines) if regex.search(line)) < count:
        if time.monotonic() > deadline or process.popen.poll() is not None:
            raise AssertionError(f"no {count} lines matching {pattern!r}:\n{process.output()}")
        time.sleep(0.05)


def connection_refused(port: int) -> bool:
    """
    Whether nothing listens on loopback port C{port}.
    """
    try:
        socket.create_connection(("127.0.0.1", port), timeout=CURL_TIMEOUT).close()
    except ConnectionRefusedError:
        return True
    return False


def refused(port: int) -> bool:
    """
    Whether a connector's session to a port is refused (closed or reset
    without an answer).
    """
    try:
        return exchange(port, b"MARKER x\n") == b""
    except ConnectionResetError:
        return True


class SlowDownload(threading.Thread):
    """
    A download through a connector, read slowly so that it lasts; its
    digest once done.
    """

    def __init__(self, port: int, size: int, seed: int) -> None:
        super().__init__(daemon=True)
        self.port, self.size, self.seed = port, size, seed
        self.received = 0
        self.digest: str | None = None
        self.error: OSError | None = None

    def run(self) -> None:
        try:
            digest = hashlib.sha256()
            with socket.create_connection(("127.0.0.1", self.port), timeout=CURL_TIMEOUT) as s:
                s.sendall(f"DOWNLOAD {self.size} {self.seed}\n".encode())
                while data := s.recv(64 * 1024):
                    digest.update(data)
                    self.received += len(data)
                    time.sleep(0.01)
            self.digest = digest.hexdigest()
        except OSError as e:  # reported by the test
            self.error = e


class ReloadTests(StackTestCase):
    """
    C{SIGHUP} reloads C{nfltr up}'s file on the link it has.
    """

    skip = missing("curl")

    def test_reloadDuringDownload(self) -> None:
        """
        Entries added start, removed ones stop, unchanged ones are not
        touched: a download through an unchanged TCP entry that runs across
        the reload completes intact, the share URL kept still answers, and
        the agent keeps its one link.  A broken file then changes nothing
        and the log names its line.
        """
        stack = self.stack
        key = stack.key("alice")
        kept, dropped, added = (stack.service() for _ in range(3))
        site_a, site_b, site_c = (stack.web_service() for _ in range(3))
        path = write_config(stack, key, tcp_entries([kept, dropped]) + http_entry(
            "site-a", site_a, "e2ee") + http_entry("site-c", site_c, "inspect"))
        agent = start_up(stack, path)
        pin = agent.wait_for(r"(sha256:[0-9a-f]{64})").group(1)
        url_a = agent.wait_for(r"share (https://site-a\S+) ").group(1)
        url_c = agent.wait_for(r"share (https://site-c\S+) ").group(1)
        _, kept_local = stack.connector(key, "box", kept, "--pin", pin)
        _, dropped_local = stack.connector(key, "box", dropped, "--pin", pin)
        self.assertEqual(exchange(dropped_local, b"MARKER before\n"), b"before\n")
        download = SlowDownload(kept_local, 48 * 1024 * 1024, 5)
        download.start()
        deadline = time.monotonic() + CURL_TIMEOUT
        while download.received < 1024 * 1024 and time.monotonic() < deadline:
            time.sleep(0.02)

        write_config(stack, key, tcp_entries([kept, added]) + http_entry(
            "site-a", site_a, "e2ee") + http_entry("site-b", site_b, "inspect"))
        agent.popen.send_signal(signal.SIGHUP)
        wait_count(agent, r"reloaded: 2 entries started, 2 stopped, 2 unchanged", 1)
        url_b = agent.wait_for(r"share (https://site-b\S+) ").group(1)
        self.assertIsNone(download.digest, "the download ended before the reload")

        _, added_local = stack.connector(key, "box", added, "--pin", pin)
        self.assertEqual(exchange(added_local, b"MARKER added\n"), b"added\n")
        self.assertTrue(refused(dropped_local))
        for url in (url_a, url_b):
            done = curl(stack, url)
            self.assertEqual(done.returncode, 0, done.stderr)
        self.assertNotEqual(curl(stack, url_c).returncode, 0)

        download.join(CURL_TIMEOUT)
        self.assertIsNone(download.error)
        self.assertEqual(download.digest,
                         hashlib.sha256(pattern(5, 48 * 1024 * 1024)).hexdigest())

        path.write_text(path.read_text() + "\n[[tcp]]\nport = 0\n")
        agent.popen.send_signal(signal.SIGHUP)
        wait_count(agent, r"not reloaded, the running entries stay", 1)
        wait_count(agent, rf"{re.escape(str(path))}:\d+: \[\[tcp\]\] 3: port 0", 1)
        self.assertEqual(exchange(added_local, b"MARKER still\n"), b"still\n")
        self.assertEqual(stack.relay.output().count("agent box (account alice) connected"), 1)


class SlowCurl:
    """
    A download of C{/bytes/SIZE} through a share URL, at most C{rate} bytes
    a second, to a file: so that it lasts across a reload.  Then, on the
    same connection if it is kept, a C{GET} of each path in C{then}.
    """

    def __init__(self, stack: Stack, url: str, size: int, rate: int,
                 then: tuple[str, ...] = ()) -> None:
        self.size = size
        name = f"download-{len(list(stack.tmp.glob('download-*')))}"
        self.path = stack.tmp / name
        self.then = [stack.tmp / f"{name}-then-{i}" for i in range(len(then))]
        command = curl_command(stack, f"{url}bytes/{size}", "--limit-rate", str(rate),
                               "--output", str(self.path))
        for path, output in zip(then, self.then, strict=True):
            command += [url + path, "--output", str(output)]
        self.popen = subprocess.Popen(command, stderr=subprocess.PIPE)

    def received(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def whole(self, case: SynchronousTestCase) -> list[bytes]:
        """
        It ended well, with every byte; what the paths C{then} got.
        """
        _, stderr = self.popen.communicate(timeout=CURL_TIMEOUT)
        case.assertEqual(self.popen.returncode, 0, stderr)
        case.assertEqual(hashlib.sha256(self.path.read_bytes()).hexdigest(),
                         hashlib.sha256(web_pattern(self.size)).hexdigest())
        return [path.read_bytes() for path in self.then]


#: curl's exit status when its --max-time is over.
CURL_TIMED_OUT = 28


class ReloadSharesTests(StackTestCase):
    """
    C{SIGHUP} changes, then removes, an e2ee share while a download runs
    through it.
    """

    skip = missing("curl")

    def test_changedThenRemoved(self) -> None:
        """
        A download through an e2ee share whose service port a reload
        changes finishes whole, from the old service; its connection ends
        after the next response (C{Connection: close}), so the request after
        that, and a new visit, reach the new service.  A download through
        the share a reload then removes finishes whole too, and a new visit
        is refused at once.
        """
        stack = self.stack
        key = stack.key("alice")
        old, new, kept = stack.web_service(), stack.web_service(), stack.service()
        path = write_config(stack, key, tcp_entries([kept]) + http_entry("site-a", old, "e2ee"))
        agent = start_up(stack, path)
        url = agent.wait_for(rf"share (https://site-a\S+) -> port {old} ").group(1)
        size = 16 * 1024 * 1024
        for entries, logged in ((http_entry("site-a", new, "e2ee"), f"-> port {new} "),
                                ("", None)):
            then = ("headers", "headers") if logged is not None else ()
            download = SlowCurl(stack, url, size, 2 * 1024 * 1024, then)
            poll_until(lambda d=download: d.received() > 1024 * 1024, CURL_TIMEOUT,
                       "the download under way")
            write_config(stack, key, tcp_entries([kept]) + entries)
            agent.popen.send_signal(signal.SIGHUP)
            if logged is not None:
                agent.wait_for(re.escape(logged))
            else:
                stack.relay.wait_for(r"agent box \(account alice\) updated: .* withdrawn site-a")
            self.assertIsNone(download.popen.poll(), "the download ended before the reload")
            visit = curl(stack, url, "--max-time", "20")
            if logged is not None:
                self.assertEqual(visit.returncode, 0, visit.stderr)
                self.assertIn(f"host: localhost:{new}".encode(), visit.stdout.lower())
            else:
                self.assertNotIn(visit.returncode, (0, CURL_TIMED_OUT), visit.stderr)
            answers = download.whole(self)
            if answers:
                self.assertIn(f"host: localhost:{new}".encode(), answers[-1].lower())


class ReloadPublicPortsTests(SynchronousTestCase):
    """
    C{SIGHUP} adds and removes public ports, TCP and UDP, and UDP entries.
    """

    def setUp(self) -> None:
        [self.tcp_public], self.udp_public = free_ports(1), free_udp_port()
        self.stack = Stack(
            Path(self.mktemp()).absolute(),
            relay_extra=("--public-ports", f"{self.tcp_public},{self.udp_public}",
                         "--public-ports-interface", "127.0.0.1"),
        )
        self.addCleanup(self.stack.close)

    def test_addedThenRemoved(self) -> None:
        """
        A reload that adds a TCP entry with a public port and a UDP entry
        with a public UDP port publishes both (the agent says where) and
        they answer; the next reload, without them, withdraws them; the
        kept entry is served throughout, on the agent's one link.
        """
        stack = self.stack
        key = stack.key("alice")
        kept, published = stack.service(), stack.service()
        dns = udp_service(stack, "dns")
        path = write_config(stack, key, tcp_entries([kept]))
        agent = start_up(stack, path)
        pin = agent.wait_for(r"(sha256:[0-9a-f]{64})").group(1)
        _, kept_local = stack.connector(key, "box", kept, "--pin", pin)

        write_config(stack, key, tcp_entries([kept]) + f"[[tcp]]\nport = {published}\n"
                     f"public-port = {self.tcp_public}\n\n[[udp]]\nport = {dns}\n"
                     f"public-port = {self.udp_public}\n")
        agent.popen.send_signal(signal.SIGHUP)
        wait_count(agent, r"reloaded: 2 entries started, 0 stopped, 1 unchanged", 1)
        agent.wait_for(rf"public port 127\.0\.0\.1:{self.tcp_public} -> port {published}")
        agent.wait_for(rf"public UDP port 127\.0\.0\.1:{self.udp_public} -> UDP port {dns}")
        self.assertEqual(exchange(self.tcp_public, b"MARKER public\n"), b"public\n")
        answer = dns_query(self.udp_public, NAME)
        self.assertEqual([a.payload.dottedQuad() for a in answer.answers], [ADDRESS])

        write_config(stack, key, tcp_entries([kept]))
        agent.popen.send_signal(signal.SIGHUP)
        wait_count(agent, r"reloaded: 0 entries started, 2 stopped, 1 unchanged", 1)
        stack.relay.wait_for(r"agent box \(account alice\) updated: ports \d+, UDP ports none")
        # The relay's log line comes before its listener has closed (a turn later).
        poll_until(lambda: connection_refused(self.tcp_public), CURL_TIMEOUT,
                   "the withdrawn public port refusing connections")
        self.assertEqual(exchange(kept_local, b"MARKER kept\n"), b"kept\n")
        self.assertEqual(stack.relay.output().count("agent box (account alice) connected"), 1)
