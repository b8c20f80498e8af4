"""
A network namespace of a test's own, for settings that are per namespace
(C{sysctl net.ipv4.*}) and that a test must not change on the host: made
by C{unshare --net} (root, or a user allowed to), held by a process that
lives until L{NetworkNamespace.close}, entered by processes through
L{NetworkNamespace.prefix} (C{nsenter}) and by the test's own sockets
through L{NetworkNamespace.sockets}.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import socket
import threading

from twisted.trial.unittest import SkipTest

from .harness import Process

#: The tools it runs (Debian: util-linux, iproute2, procps).
TOOLS = ("unshare", "nsenter", "ip", "sysctl")
#: C{setns(2)}'s flag for a network namespace (<sched.h>).
CLONE_NEWNET = 0x40000000
#: What the holder prints once the namespace is set up.
READY = "namespace ready"


class NetworkNamespace:
    """
    A new network namespace with its loopback up and C{sysctls} set
    (C{"net.ipv4.tcp_migrate_req=1"}, ...).

    @raise SkipTest: the tools are missing, or the namespace or a setting
        cannot be made here (not permitted, or unknown to this kernel); the
        reason says which.
    """

    def __init__(self, *sysctls: str) -> None:
        absent = [tool for tool in TOOLS if shutil.which(tool) is None]
        if absent:
            raise SkipTest(f"not installed here: {', '.join(absent)} (see .ci/run)")
        setup = " && ".join(["ip link set lo up", *(f"sysctl -qw {s}" for s in sysctls),
                             f"echo {READY}", "exec sleep infinity"])
        # unshare and sh exec what follows, so the holder keeps this pid.
        self.holder = Process(["unshare", "--net", "--", "sh", "-c", setup], name="netns")
        try:
            self.holder.wait_for(READY)
        except AssertionError:
            self.close()
            raise SkipTest("no network namespace with " + (", ".join(sysctls) or "defaults")
                           + " here: " + self.holder.output().strip()) from None
        self.path = f"/proc/{self.holder.popen.pid}/ns/net"

    def prefix(self) -> list[str]:
        """
        What runs a command in the namespace: C{prefix() + command}.
        """
        return ["nsenter", f"--net={self.path}", "--"]

    def sockets(self, count: int) -> list[socket.socket]:
        """
        C{count} new TCP sockets of the namespace (a socket stays in the
        namespace it was made in, whichever thread uses it).  A thread of
        its own enters the namespace and makes them, so no thread of the
        test changes namespace.
        """
        made: list[socket.socket] = []
        errors: list[OSError] = []

        def make() -> None:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(self.path, os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    errno = ctypes.get_errno()
                    errors.append(OSError(errno, f"setns {self.path}: {os.strerror(errno)}"))
                    return
            finally:
                os.close(fd)
            made.extend(socket.socket() for _ in range(count))

        thread = threading.Thread(target=make, name="netns sockets")
        thread.start()
        thread.join()
        if errors:
            raise errors[0]
        return made

    def close(self) -> None:
        """
        End the holder: the namespace goes with the last process in it.
        """
        self.holder.stop()
