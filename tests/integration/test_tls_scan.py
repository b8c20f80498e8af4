"""
The TLS scan of conformance/tls, in the trial suite: sslyze (with its
Mozilla intermediate checker) and the probes against a real relay's own name
and an e2ee share (TLS ended by the agent), every rule of
L{conformance.tls.policy} checked; and testssl.sh against both.  The full
scan (four legs, results written to docs/conformance/tls) is
C{conformance/tls/run}.

sslyze is not one of nfltr's test extras: it pins an older cryptography than
nfltr's pyOpenSSL accepts, so it lives in a venv of its own, found as
L{conformance.tls.scan.find_sslyze_python} says (C{NFLTR_SSLYZE_PYTHON},
else conformance/tls/.venv, which C{conformance/tls/run} makes, else this
Python); the tests are skipped when there is none.  testssl.sh is Debian's
package C{testssl.sh} (found as L{conformance.tls.testssl.find_testssl}
says); its test is skipped when it is not installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import SkipTest

from twisted.trial.unittest import SynchronousTestCase

from conformance.tls import policy, scan, testssl

#: Rules that fail today, with why (none: the three that did, TLS 1.3
#: tickets and the group list, are set through OpenSSL's configuration by
#: L{nfltr.tls._openssl_config}).
KNOWN: dict[str, str] = {}

#: The rules read from testssl.sh's output: checked by L{TLSScanTests.test_testssl}
#: alone, since the leg tests do not run it.
TESTSSL_RULES = {"testssl-no-vulnerabilities", "testssl-no-weak-ciphers"}


class TLSScanTests(SynchronousTestCase):
    """
    Scan one leg of a fresh relay per test.
    """

    def scanLeg(self, name: str) -> dict[str, Any]:
        """
        Start a relay with what leg C{name} needs and scan it with sslyze and
        the probes: the leg's results.
        """
        python = scan.find_sslyze_python()
        if python is None:
            raise SkipTest(
                f"sslyze is not importable: run conformance/tls/run once (it makes"
                f" conformance/tls/.venv with sslyze=={scan.SSLYZE_VERSION}), or set"
                f" NFLTR_SSLYZE_PYTHON to a Python that has it"
            )
        work = Path(self.mktemp()).absolute()
        relay = scan.Relay(work / "stack", [scan.LEGS[name]])
        self.addCleanup(relay.close)
        return scan.scan_leg(relay, scan.LEGS[name], python, work)

    def assertPolicy(self, results: dict[str, Any]) -> None:
        """
        Every rule passes but the L{KNOWN} failures and the testssl.sh rules.
        """
        failed = {o.rule: o.detail for o in policy.evaluate(results)
                  if not o.passed and o.rule not in KNOWN.keys() | TESTSSL_RULES}
        self.assertEqual(failed, {})

    def test_relayName(self) -> None:
        """
        The relay's own name (server name C{localhost}): the relay ends TLS
        with its certificate.
        """
        self.assertPolicy(self.scanLeg("relay"))

    def test_e2eeShare(self) -> None:
        """
        An e2ee share URL (C{blog.localhost}): the agent ends TLS, through the
        relay, with the key it holds.
        """
        self.assertPolicy(self.scanLeg("e2ee"))

    def test_testssl(self) -> None:
        """
        testssl.sh, on the relay's own name and an e2ee share at once, finds
        no vulnerability and no weak cipher, and ran to the end.
        """
        binary = testssl.find_testssl()
        if binary is None:
            raise SkipTest(
                "testssl.sh is not installed: apt-get install testssl.sh (Debian's program is"
                " `testssl`), or set NFLTR_TESTSSL to it"
            )
        legs = [scan.LEGS["relay"], scan.LEGS["e2ee"]]
        work = Path(self.mktemp()).absolute()
        relay = scan.Relay(work / "stack", legs)
        self.addCleanup(relay.close)
        found = scan.scan_testssl(relay, legs, binary, work, len(legs))
        for name, tested in found.items():
            results = {"leg": {}, "probes": {}, "testssl": tested}
            failed = {o.rule: o.detail for o in policy.evaluate(results, only=TESTSSL_RULES)
                      if not o.passed}
            self.assertEqual(failed, {}, name)
            status = tested["run"]["exit_status"]
            self.assertTrue(status is not None and status < policy.FATAL_STATUS,
                            f"{name}: testssl.sh exit status {status}: {tested['run']}")

