# -*- test-case-name: tests.test_bench_tor -*-
"""
What Tor costs a share: the relay's onion listener and an agent that dials
through Tor, on the tests' private Tor network (L{tests.tor_network}: three
authorities, two relays, client tors, all on loopback), against the direct
path in the same run.  A benchmark, not a test.

    python -m bench.tor [--rounds R] [--requests N] [--mib M]

Started once: the network (its bootstrap timed), a relay with C{--onion 443}
on the first client tor's control port (the time from its start to its
"onion service up" line: the time to a working onion listener, and then to
the first visitor request through Tor that succeeds), a web service, and two
C{nfltr http} agents (e2ee): one dialing the relay directly, one through
Tor (C{--tor}, the second client tor's SOCKS port, to the onion address).

Each round (the order rotating) runs every path with curl, trusting the
share CA:

  - C{direct}: to the relay's TLS port on loopback, the direct agent's share;
  - C{tor-visitor}: the same share through Tor (curl's
    C{--socks5-hostname} on the second client tor, the onion name);
  - C{tor-agent}: the Tor-dialing agent's share, the visitor direct.

Per path and round: the first request of a connection (connect, TLS, 1 KiB
answer), the median of N-1 more requests on that connection (keep-alive),
and an M MiB download (throughput).  Medians over the rounds, and each
Tor path's ratio to the direct one per round, then the median.  All on one
machine: Tor's own cost (circuits of three or six hops, cells, onion
crypto), not the Internet's latency, which a real Tor network adds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: What curl reports per URL: seconds to connected, TLS done, first byte,
#: done; bytes per second; bytes.
FORMAT = "%{time_connect} %{time_appconnect} %{time_starttransfer} %{time_total} " \
         "%{speed_download} %{size_download}\\n"
PATHS = ("direct", "tor-visitor", "tor-agent")
CURL_TIMEOUT = 300.0
SMALL = 1024


def parse_curl(output: str) -> list[dict[str, float]]:
    """
    curl's L{FORMAT} lines, one per URL.
    """
    keys = ("connect", "tls", "first_byte", "total", "bytes_per_s", "size")
    return [dict(zip(keys, map(float, line.split()), strict=True))
            for line in output.splitlines() if line.strip()]


def round_figures(small: list[dict[str, float]], big: dict[str, float], mib: int
                  ) -> dict[str, float]:
    """
    One path's figures in one round from curl's reports: C{small} the 1 KiB
    requests on one connection, C{big} the download.
    """
    if any(r["size"] != SMALL for r in small) or big["size"] != mib << 20:
        raise RuntimeError("a short answer: curl got fewer bytes than asked")
    return {
        "first_request_ms": small[0]["total"] * 1000,
        "keepalive_request_ms": statistics.median(r["total"] for r in small[1:]) * 1000,
        "download_mib_s": big["bytes_per_s"] / (1 << 20),
    }


def summarize(rounds: list[dict[str, dict[str, float]]]) -> dict[str, Any]:
    """
    Per path: the median of each figure over the rounds, and for the Tor
    paths the median of its per-round ratio to C{direct}.
    """
    out: dict[str, Any] = {}
    for path in PATHS:
        figures = [r[path] for r in rounds if path in r]
        if not figures:
            continue
        entry: dict[str, Any] = {"rounds": len(figures)}
        for key in figures[0]:
            entry[key] = round(statistics.median(f[key] for f in figures), 2)
            if path != "direct":
                ratios = [r[path][key] / r["direct"][key] for r in rounds
                          if path in r and "direct" in r and r["direct"][key]]
                entry[f"{key}_vs_direct"] = round(statistics.median(ratios), 2)
        out[path] = entry
    return out


def markdown(summary: dict[str, Any], startup: dict[str, float]) -> str:
    lines = [
        "| path | first request on a new connection, ms | keep-alive request, ms |"
        " download, MiB/s |",
        "|---|---|---|---|",
    ]
    for path, entry in summary.items():
        def cell(key: str, entry: dict[str, Any] = entry, path: str = path) -> str:
            ratio = "" if path == "direct" else f" ({entry[key + '_vs_direct']}x direct)"
            return f"{entry[key]}{ratio}"
        lines.append(f"| {path} | {cell('first_request_ms')} | {cell('keepalive_request_ms')}"
                     f" | {cell('download_mib_s')} |")
    lines.append("")
    lines.append("Start-up, seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in startup.items()))
    return "\n".join(lines)


class TorBench:
    """
    The network, the relay, the agents; L{measure} one path.
    """

    def __init__(self, tmp: Path, args: argparse.Namespace) -> None:
        from tests.integration.harness import Stack, nfltr
        from tests.integration.test_tor import ONION_UP_TIMEOUT, TOR_DIAL_TIMEOUT, tor_args
        from tests.tor_network import TorNetwork

        self.args = args
        self.startup: dict[str, float] = {}
        self.network = TorNetwork(tmp / "tor")
        self.network.start()
        self.startup["tor network bootstrap"] = self.network.timings["bootstrapped"]
        service, visitor = self.network.clients[0], self.network.clients[1]
        self.visitor = visitor
        began = time.monotonic()
        self.stack = Stack(tmp / "stack", relay_extra=(
            "--onion", "443", "--tor-control", service.control_endpoint,
            "--share-domain", "onion", "--log-level", "info"))
        self.stack.relay.wait_for(r"onion service up", ONION_UP_TIMEOUT)
        self.startup["relay start to onion service up"] = time.monotonic() - began
        self.address = self.stack.info["onion"].rsplit(":", 1)[0]
        self.ca = str(self.stack.data / "tls" / "share-ca.crt")
        key = self.stack.key("bench")
        port = self.stack.web_service()
        self.urls: dict[str, str] = {}
        _, self.urls["direct"] = self.stack.http_agent(key, "direct", port)
        self.urls["tor-visitor"] = self.urls["direct"]
        viaTor = self.stack.start(
            nfltr("http", str(port), "--name", "viator", "--state-dir",
                  str(self.stack.tmp / "agent-viator"),
                  *tor_args(self.address, visitor, self.stack.ca)),
            "http agent viator", {"NFLTR_KEY": key})
        self.urls["tor-agent"] = viaTor.wait_for(r"share (https://\S+) ", TOR_DIAL_TIMEOUT
                                                 ).group(1)
        up = time.monotonic()
        while True:
            try:
                self.curl("tor-visitor", [f"{self.urls['direct']}bytes/{SMALL}"])
                break
            except RuntimeError:
                if time.monotonic() - up > ONION_UP_TIMEOUT:
                    raise
                time.sleep(0.5)
        self.startup["relay start to first visit through Tor"] = time.monotonic() - began

    def curl(self, path: str, urls: list[str]) -> list[dict[str, float]]:
        direct = int(self.stack.address.rsplit(":", 1)[1])
        args = ["curl", "--silent", "--show-error", "--fail", "--cacert", self.ca,
                "--write-out", FORMAT]
        if path == "tor-visitor":
            args += ["--socks5-hostname", f"127.0.0.1:{self.visitor.socks_port}"]
        else:  # the onion name resolved to the relay's TLS port (curl needs --resolve for it)
            host = urls[0].split("/")[2].split(":")[0]
            args += ["--resolve", f"{host}:{direct}:127.0.0.1"]
            urls = [url.replace(f"//{host}/", f"//{host}:{direct}/", 1) for url in urls]
        for url in urls:
            args += [url, "--output", "/dev/null"]
        done = subprocess.run(args, capture_output=True, text=True, timeout=CURL_TIMEOUT,
                              check=False)
        if done.returncode:
            raise RuntimeError(f"curl ({path}): {done.stderr.strip()}")
        return parse_curl(done.stdout)

    def measure(self, path: str) -> dict[str, float]:
        base = self.urls[path]
        small = self.curl(path, [f"{base}bytes/{SMALL}"] * self.args.requests)
        [big] = self.curl(path, [f"{base}bytes/{self.args.mib << 20}"])
        return round_figures(small, big, self.args.mib)

    def close(self) -> None:
        self.stack.close()
        self.network.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.tor",
                                description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--requests", type=int, default=20, help="1 KiB requests per connection")
    p.add_argument("--mib", type=int, default=8, help="size of the download")
    p.add_argument("--json", help="write the results there too")
    args = p.parse_args(argv)
    from tests.tor_network import missing_tor

    if why := missing_tor():
        print(f"bench.tor: {why}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="nfltr-bench-tor-") as tmp:
        bench = TorBench(Path(tmp), args)
        try:
            rounds = []
            for n in range(args.rounds):
                shift = n % len(PATHS)
                figures = {}
                for path in PATHS[shift:] + PATHS[:shift]:
                    figures[path] = bench.measure(path)
                rounds.append(figures)
                print(f"round {n + 1}: " + json.dumps(figures), file=sys.stderr, flush=True)
        finally:
            bench.close()
    summary = summarize(rounds)
    startup = {k: round(v, 2) for k, v in bench.startup.items()}
    print(markdown(summary, startup))
    if args.json:
        Path(args.json).write_text(json.dumps({
            "command": "python -m bench.tor " + " ".join(argv or sys.argv[1:]),
            "startup_s": startup, "summary": summary, "rounds": rounds}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
