"""
docs/config.md and its example file, docs/nfltr.example.toml, checked
against the code: the example is a good file, and the page names every key
a file takes (L{tests.integration.test_config} runs the example).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from nfltr.cli.config_check import check_config
from nfltr.cli.config_file import ENTRY_OPTIONS, PORT, TOP_OPTIONS

DOCS = Path(__file__).resolve().parents[2] / "docs"
EXAMPLE = DOCS / "nfltr.example.toml"


def example_dir(case: SynchronousTestCase) -> Path:
    """
    The example file in a directory of its own, beside the secret files it
    names (mode 0600); the file's path.
    """
    directory = Path(case.mktemp()).absolute()
    directory.mkdir()
    path = directory / "nfltr.toml"
    shutil.copy(EXAMPLE, path)
    for name, text in (("nfltr.key", "the-key\n"), ("hooks.header", "X-Hook: s3cret\n")):
        (directory / name).write_text(text)
        (directory / name).chmod(0o600)
    return path


class ExampleTests(SynchronousTestCase):
    """
    The documented example.
    """

    def test_good(self) -> None:
        """
        The example is a good file: one agent for two TCP services and two
        share URLs, with the settings its comments describe.
        """
        path = example_dir(self)
        config = check_config(path, {})
        options = config.options
        self.assertEqual((options.name, options.ports), ("office", (22, 5432)))
        self.assertEqual(options.relay.address, "relay.example.com:8443")
        self.assertEqual(options.relay.key, "the-key")
        self.assertEqual(options.state_dir, path.parent / "state")
        blog, hooks = options.http
        self.assertEqual((blog.name, blog.mode, hooks.name, hooks.mode),
                         ("blog", "e2ee", "hooks", "inspect"))
        self.assertTrue(hooks.policy.credentials)
        self.assertEqual(len(hooks.policy.allow), 2)

    def test_everyKeyDocumented(self) -> None:
        """
        docs/config.md names every key a config file takes.
        """
        page = (DOCS / "config.md").read_text()
        keys = {o.name for o in TOP_OPTIONS} | {PORT}
        for options in ENTRY_OPTIONS.values():
            keys |= {o.name for o in options}
        self.assertEqual(sorted(k for k in keys if f"`{k}`" not in page), [])
