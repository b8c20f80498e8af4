"""
atheris fuzz target for nfltr's ClientHello parser (C{nfltr.sni}).

The parser's contract: on any input, split into any reads, it returns NEED_DATA or a ClientHello,
or raises ClientHelloError, and nothing else; C{buffered()} is exactly what it was fed; the
outcome does not depend on how the input was split; an error is sticky.  Each input is the byte
stream a visitor sends, fed whole and again in reads cut at points drawn from the input's CRC (so
the mutator works on plain TLS bytes and the seed corpus is the captured hellos), then ended.
Any other exception, or a broken invariant (AssertionError), is a finding.

    python conformance/fuzz/clienthello_fuzz.py --make-corpus DIR   # seed DIR with real hellos
    python conformance/fuzz/clienthello_fuzz.py DIR [libFuzzer options]

Without atheris, C{TestOneInput} is plain Python: C{tests/test_fuzz_targets.py} runs it under
hypothesis.  See conformance/fuzz/README.md.
"""

from __future__ import annotations

import contextlib
import random
import sys
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

try:
    import atheris
except ImportError:  # run under hypothesis by the trial suite
    atheris = None

with atheris.instrument_imports() if atheris is not None else contextlib.nullcontext():
    from nfltr.sni import (
        NEED_DATA,
        ClientHello,
        ClientHelloError,
        ClientHelloParser,
    )


def outcome(chunks: list[bytes]) -> tuple[str, object]:
    """
    Feed C{chunks} to a new parser, checking the contract; say how it ended.
    """
    parser = ClientHelloParser()
    fed = b""
    result: object = NEED_DATA
    for chunk in chunks:
        try:
            result = parser.receive_data(chunk)
        except ClientHelloError as e:
            try:
                parser.receive_data(b"\x16")
            except ClientHelloError as again:
                assert again.reason == e.reason, (again.reason, e.reason)
            else:
                raise AssertionError("error not sticky") from None
            return ("error", e.reason)
        fed += chunk
        assert result is NEED_DATA or isinstance(result, ClientHello), result
        assert parser.buffered() == fed
    return ("hello", result) if isinstance(result, ClientHello) else ("need", None)


def TestOneInput(data: bytes) -> None:
    """
    One input: whole, then split, then each ended.
    """
    if not data:
        return
    rng = random.Random(zlib.crc32(data))
    cuts = sorted({rng.randrange(1, len(data) + 1) for _ in range(rng.randrange(8))})
    chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=False) if a < b]
    whole = outcome([data])
    split = outcome(chunks)
    assert whole == split, (whole, split, cuts)
    ended = outcome([*chunks, b""])
    assert ended[0] != "need", ended
    if whole[0] == "need":
        assert ended == ("error", "truncated"), ended


def make_corpus(directory: Path) -> None:
    """
    Write the captured hellos of C{tests/sni/hellos/} into C{directory}, one file each.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for path in sorted((REPO / "tests" / "sni" / "hellos").glob("*.hex")):
        (directory / path.stem).write_bytes(bytes.fromhex(path.read_text()))
        print(f"{directory / path.stem}")


def main() -> None:
    """
    Seed a corpus, or run the fuzzer with libFuzzer's arguments.
    """
    if sys.argv[1:2] == ["--make-corpus"] and len(sys.argv) == 3:  # noqa: PLR2004
        make_corpus(Path(sys.argv[2]))
        return
    if atheris is None:
        sys.exit("atheris is not installed: pip install atheris (see conformance/fuzz/README.md)")
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
