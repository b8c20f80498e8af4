"""
The ssh-audit conformance of conformance/ssh-audit, in the trial suite:
ssh-audit's audit and policy check against the stand-in server
(conformance/ssh-audit/standin.py: nfltr's SSH transport and host keys,
which is all that ssh-audit sees), by default and post-quantum only, every
rule of conformance/ssh-audit/audit.py checked.  The full audit of a real
relay, reports written to docs/conformance/ssh-audit, is
C{conformance/ssh-audit/run}.

ssh-audit is not one of nfltr's test extras: it lives in a venv of its own,
conformance/ssh-audit/.venv, which C{conformance/ssh-audit/run} and
C{.ci/run} make (C{NFLTR_SSH_AUDIT} names another ssh-audit); the tests are
skipped when there is none of the pinned release.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from twisted.trial.unittest import SkipTest, SynchronousTestCase

HERE = Path(__file__).resolve().parents[2] / "conformance" / "ssh-audit"


def load_audit() -> ModuleType:
    """
    conformance/ssh-audit/audit.py (a directory name with a dash cannot be
    imported as a package).
    """
    spec = importlib.util.spec_from_file_location("nfltr_ssh_audit", HERE / "audit.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


audit = load_audit()


class AuditTests(SynchronousTestCase):
    """
    ssh-audit against the stand-in, one mode per test.
    """

    def setUp(self) -> None:
        tool = audit.find_ssh_audit()
        if tool is None or audit.ssh_audit_version(tool) != audit.SSH_AUDIT_VERSION:
            raise SkipTest(
                f"ssh-audit {audit.SSH_AUDIT_VERSION} not found: run conformance/ssh-audit/run"
                f" once (it makes conformance/ssh-audit/.venv), or set NFLTR_SSH_AUDIT"
            )
        self.tool: str = tool

    def audited(self, mode: str) -> Any:
        child, port, banner = audit.start_server(mode, Path(self.mktemp()).absolute(), True)
        self.addCleanup(child.stop)
        return audit.audit(self.tool, mode, port, banner, rate_test=False)

    def assertRulesPass(self, result: Any) -> None:
        failed = {name: detail for name, (ok, detail) in audit.evaluate(result).items()
                  if not ok}
        self.assertEqual(failed, {})

    def test_default(self) -> None:
        """
        As started by default: no failure, no warning but curve25519-sha256's
        post-quantum note, strict key exchange offered, the hybrid
        post-quantum key exchange first, RSA host keys of 3072 bits, no
        SHA-1; the policy check passes.
        """
        result = self.audited("default")
        self.assertRulesPass(result)
        self.assertIn("Passed", result.policy_text)

    def test_pqOnly(self) -> None:
        """
        Post-quantum only: the same, with no warning at all and the hybrid
        key exchange alone.
        """
        result = self.audited("pq-only")
        self.assertRulesPass(result)
        self.assertEqual(audit.notes(result.report, "warn"), set())

    def test_policyCanFail(self) -> None:
        """
        The policy check fails a server that offers what the policy does not
        list (here: a policy without aes128-ctr).
        """
        child, port, _ = audit.start_server("default", Path(self.mktemp()).absolute(), True)
        self.addCleanup(child.stop)
        policy = Path(self.mktemp())
        text = audit.POLICY.read_text()
        self.assertIn(", aes128-ctr\n", text)
        policy.write_text(text.replace(", aes128-ctr\n", "\n"))
        done = subprocess.run([self.tool, "-n", "-P", str(policy), "-p", str(port), "127.0.0.1"],
                              capture_output=True, text=True, timeout=120, check=False)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("Failed", done.stdout)


class RuleTests(SynchronousTestCase):
    """
    The rules of conformance/ssh-audit/audit.py fail what they must, on
    reports made up for the purpose (no ssh-audit needed).
    """

    def result(self, mode: str = "default", **changes: Any) -> Any:
        report: dict[str, Any] = {
            "kex": [{"algorithm": "mlkem768x25519-sha256", "notes": {}},
                    {"algorithm": "curve25519-sha256", "notes": {"warn": [
                        "does not provide protection against post-quantum attacks"]}},
                    {"algorithm": "ext-info-s", "notes": {}},
                    {"algorithm": "kex-strict-s-v00@openssh.com", "notes": {}}],
            "key": [{"algorithm": "ssh-ed25519", "notes": {}},
                    {"algorithm": "rsa-sha2-512", "keysize": 3072, "notes": {}}],
            "enc": [{"algorithm": "aes256-gcm@openssh.com", "notes": {}}],
            "mac": [{"algorithm": "hmac-sha2-256-etm@openssh.com", "notes": {}}],
            "cves": [], "recommendations": {},
        }
        report.update(changes)
        return audit.ModeResult(mode, "SSH-2.0-test", report, "", 0, "Result: Passed")

    def failing(self, result: Any) -> set[str]:
        return {name for name, (ok, _) in audit.evaluate(result).items() if not ok}

    def test_good(self) -> None:
        """
        The made-up report of a good server passes every rule.
        """
        self.assertEqual(self.failing(self.result()), set())

    def test_each(self) -> None:
        """
        A failure note, an unexpected warning, a CVE, a recommendation, no
        strict-KEX marker, a classic key exchange first, a small RSA key, an
        SHA-1 algorithm, a failed policy check: each fails its rule.
        """
        base = self.result().report
        cases = {
            "no-failures": {"enc": [{"algorithm": "3des-cbc", "notes": {"fail": ["broken"]}}]},
            "only-expected-warnings": {"mac": [{"algorithm": "hmac-sha2-256",
                                                "notes": {"warn": ["encrypt-and-MAC"]}}]},
            "no-cves": {"cves": [{"name": "CVE-0000-0000"}]},
            "no-recommendations": {"recommendations": {"critical": {"del": {"kex": []}}}},
            "strict-kex-offered": {"kex": base["kex"][:3]},
            "post-quantum-kex-first": {"kex": base["kex"][1:2] + base["kex"][:1]},
            "rsa-host-key-3072": {"key": [{"algorithm": "rsa-sha2-256", "keysize": 2048,
                                           "notes": {}}]},
            "no-sha1": {"mac": [{"algorithm": "hmac-sha1-etm@openssh.com", "notes": {}}]},
        }
        for rule, change in cases.items():
            self.assertIn(rule, self.failing(self.result(**change)), rule)
        failed_policy = self.result()
        failed_policy.policy_code = 3
        self.assertEqual(self.failing(failed_policy), {"policy-check-passes"})

    def test_pqOnlyWarnsOfNothing(self) -> None:
        """
        In the post-quantum-only mode even curve25519-sha256's note is a
        failure (it should not be offered), and a classic key exchange beside
        the hybrid one fails.
        """
        self.assertIn("only-expected-warnings", self.failing(self.result("pq-only")))
        self.assertIn("post-quantum-kex-first", self.failing(self.result("pq-only")))
