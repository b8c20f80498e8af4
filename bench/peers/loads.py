"""
The loads of L{bench.peers} and the parsing of what their generators print.

Throughput loads (L{Load}), run through a visitor L{Endpoint}:

  - C{bulk-N}: C{iperf3 -c -P N} against C{iperf3 -s};
  - C{http-N}: C{wrk -cN}, keep-alive, GET of nginx's 1 KiB file (C{http-100}
    and C{http-1000}: many concurrent connections through one tunnel);
  - C{close-N}: the same with C{Connection: close}, a new connection (so a
    new tunnel session, and a TLS handshake where the visitor speaks TLS)
    for each request;
  - C{mib-N}: N keep-alive connections GETting nginx's 1 MiB file.

The other rows (idle, restart, agents) are measured by L{bench.peers.run}.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._nginx import FILES
from .._stack import run_bounded
from .._system import BenchError

KINDS = ("bulk", "http", "close", "mib")
#: Every load, in the order of the tables.
ALL = (
    "bulk-1", "bulk-8", "http-1", "http-50", "close-50", "mib-50", "http-100", "http-1000",
)

# wrk connects to 127.0.0.1 whatever the URL's host (which it still sends as
# the TLS server name and in Host: share names and pagekite's kite name do not
# resolve here), and prints its summary as one JSON line.
WRK_SCRIPT = """\
wrk.resolve = function(host, service)
  wrk.addrs = wrk.lookup("127.0.0.1", service)
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "bytes": %d, "errors": {"connect": %d, "read": %d,'
    .. ' "write": %d, "status": %d, "timeout": %d}, "latency_us": {"p50": %d, "p90": %d,'
    .. ' "p99": %d, "max": %d, "mean": %.1f}}\\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
    e.timeout, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, latency.mean))
end
"""


@dataclass(frozen=True)
class Endpoint:
    """
    Where a visitor goes: C{scheme://host:port/} with the connection made to
    127.0.0.1:C{port} (C{host} is only the TLS server name and C{Host}).
    """

    port: int
    host: str = "127.0.0.1"
    scheme: str = "http"

    def url(self, path: str) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{path}"


@dataclass(frozen=True)
class Load:
    """
    One throughput load (see the module).
    """

    name: str
    kind: str
    parallel: int

    @classmethod
    def parse(cls, name: str) -> Load:
        """
        @raise ValueError: not C{KIND-N}.
        """
        kind, _, n = name.partition("-")
        if kind not in KINDS or not n.isdigit() or int(n) < 1:
            raise ValueError(name)
        return cls(name, kind, int(n))

    @property
    def service(self) -> str:
        """
        C{iperf3} or C{nginx}: what the load needs behind the tunnel.
        """
        return "iperf3" if self.kind == "bulk" else "nginx"

    @property
    def path(self) -> str:
        return FILES["1m" if self.kind == "mib" else "1k"][0]

    @property
    def per_gb(self) -> bool:
        """
        Whether its cost is counted per GB (else per 1,000 requests).
        """
        return self.kind in ("bulk", "mib")

    @property
    def unit(self) -> str:
        return "Gbit/s" if self.kind == "bulk" else "req/s"

    def run(self, endpoint: Endpoint, seconds: int, script: Path) -> dict[str, Any]:
        """
        Run the load generator against C{endpoint} for C{seconds}; what it
        measured, with C{rate} (Gbit/s or requests/s) and C{bytes}.

        @raise BenchError: it failed.
        """
        if self.kind == "bulk":
            done = run_bounded(iperf_command(endpoint.port, self.parallel, seconds), seconds + 30)
            return parse_iperf(done.stdout, done.returncode, done.stderr)
        done = run_bounded(
            wrk_command(endpoint.url(self.path), self.parallel, seconds, script,
                        close=self.kind == "close"),
            seconds + 30,
        )
        return parse_wrk(done.stdout, done.returncode, done.stderr)


def iperf_command(port: int, streams: int, seconds: int) -> list[str]:
    return [
        "iperf3", "-c", "127.0.0.1", "-p", str(port), "-P", str(streams), "-t", str(seconds),
        "-i", "0", "-J", "--connect-timeout", "10000",
    ]


def wrk_command(
    url: str, connections: int, seconds: int, script: Path, close: bool = False
) -> list[str]:
    return [
        "wrk", f"-t{min(2, connections)}", f"-c{connections}", f"-d{seconds}s", "--timeout", "5s",
        *(["-H", "Connection: close"] if close else []), "-s", str(script), url,
    ]


def parse_iperf(stdout: str, returncode: int = 0, stderr: str = "") -> dict[str, Any]:
    """
    What C{iperf3 -J} reported: bytes received and Gbit/s at the receiver.

    @raise BenchError: it failed.
    """
    try:
        report = json.loads(stdout)
    except ValueError:
        raise BenchError(f"iperf3 ({returncode}): {stdout[-500:]}{stderr}") from None
    if returncode != 0 or "error" in report:
        raise BenchError(f"iperf3 ({returncode}): {report.get('error')}")
    received, sent = report["end"]["sum_received"], report["end"]["sum_sent"]
    gbit_s = received["bits_per_second"] / 1e9
    return {
        "rate": round(gbit_s, 3), "gbit_s": round(gbit_s, 3), "bytes": received["bytes"],
        "seconds": round(received["seconds"], 3), "sent_bytes": sent["bytes"],
        "retransmits": sent.get("retransmits"), "errors": 0,
    }


def parse_wrk(stdout: str, returncode: int = 0, stderr: str = "") -> dict[str, Any]:
    """
    What wrk reported through L{WRK_SCRIPT}: requests, errors by kind,
    latency, and the rate: good requests (answered, and not with a non-2xx
    status) per second.  A run without a single good request is a result
    (rate 0), not a failure: some tools break under some loads.

    @raise BenchError: wrk failed or printed no summary.
    """
    lines = [line for line in stdout.splitlines() if line.startswith('{"requests"')]
    if returncode != 0 or not lines:
        raise BenchError(f"wrk ({returncode}): {stdout[-500:]}{stderr}")
    report = json.loads(lines[-1])
    seconds = report["duration_us"] / 1e6
    latency = report["latency_us"]
    good = report["requests"] - report["errors"]["status"]
    req_s = good / seconds if seconds > 0 else 0.0
    return {
        "rate": round(req_s, 1), "req_s": round(req_s, 1), "requests": good,
        "answered": report["requests"],
        "seconds": round(seconds, 3), "bytes": report["bytes"],
        "errors": sum(report["errors"].values()), "error_kinds": report["errors"],
        "p50_ms": latency["p50"] / 1000, "p99_ms": latency["p99"] / 1000,
        "max_ms": latency["max"] / 1000,
    }
