# -*- test-case-name: tests.agent.test_names -*-
"""
An agent's name and state directory.

Without C{--name}, an agent takes a random readable name
(C{adjective-noun-NNNN}) the first time and keeps it in
C{STATE_DIR/name}, so the connect command it prints stays valid across
restarts.  Two agents of one account therefore need their own state
directories (or names): the relay gives a name to one agent at a time.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from pathlib import Path

from nfltr.store import DirectoryInUse, OwnerLock, claim_owner

# The writing and locking helpers of the TLS files serve the name file too.
from nfltr.tls import locked_directory, write_atomically
from nfltr.wire.messages import MessageError, check_name

from ._errors import ConfigError

NAME_FILE = "name"
_ADJECTIVES = (
    "amber", "brave", "calm", "clever", "crisp", "eager", "fair", "gentle", "glad", "golden",
    "happy", "jolly", "keen", "kind", "lively", "lucky", "merry", "mild", "neat", "noble",
    "plain", "proud", "quick", "quiet", "rapid", "silver", "steady", "sunny", "swift", "tidy",
    "vivid", "witty",
)
_NOUNS = (
    "badger", "beaver", "bison", "crane", "falcon", "ferret", "finch", "fox", "gecko", "heron",
    "ibis", "koala", "lark", "lemur", "lynx", "marten", "moose", "newt", "otter", "owl",
    "panda", "puffin", "quail", "raven", "robin", "seal", "stork", "swan", "tapir", "tern",
    "walrus", "wren",
)


def default_state_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """
    C{$XDG_STATE_HOME/nfltr/agent}, by default C{~/.local/state/nfltr/agent}.
    """
    base = environ.get("XDG_STATE_HOME") or os.path.join(
        environ.get("HOME") or os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "nfltr" / "agent"


def random_name(rand: random.Random) -> str:
    """
    A readable name such as C{quiet-otter-4821}.
    """
    return f"{rand.choice(_ADJECTIVES)}-{rand.choice(_NOUNS)}-{rand.randrange(1000, 10000)}"


def agent_name(state_dir: Path, given: str | None, rand: random.Random | None = None) -> str:
    """
    The agent's name: C{given} if there is one, else the one kept in
    C{state_dir}, else a new random one, written there.

    @raise MessageError: C{given} or the kept name is not a valid name.
    """
    if given is not None:
        return check_name(given)
    path = state_dir / NAME_FILE
    with locked_directory(state_dir):
        try:
            kept = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            name = random_name(rand or random.SystemRandom())
            write_atomically(path, (name + "\n").encode("ascii"), 0o644)
            return name
    try:
        return check_name(kept)
    except MessageError as e:
        raise MessageError(f"{path}: {e}; fix or delete the file") from None


def claim_name(state_dir: Path, name: str) -> OwnerLock:
    """
    Hold agent C{name} in C{state_dir} for this process (until it ends): two agents of one
    name would replace each other at the relay, each told that a newer connection took over,
    for ever.  Agents of other names may share the state directory, made here (0700) if
    missing.

    @raise ConfigError: another process runs this agent, naming its pid.
    """
    try:
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        return claim_owner(
            state_dir / f"agent-{name}.lock", f"agent {name} (state directory {state_dir})",
            "give this one another --name or --state-dir",
        )
    except DirectoryInUse as e:
        raise ConfigError(str(e)) from None
    except OSError as e:
        why = e.strerror or e
        raise ConfigError(f"cannot use the state directory {state_dir}: {why}") from None
