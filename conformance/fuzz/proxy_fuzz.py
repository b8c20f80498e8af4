"""
atheris fuzz target for nfltr's PROXY protocol parser (C{nfltr.wire.proxy_protocol}).

The parser's contract: on any input, split into any reads, it returns None (more needed) or a
ProxyHeader, or raises ProxyHeaderError, and nothing else; the outcome (the header, or the
error, and the bytes after the header) does not depend on how the input was split; once a
header is read, the bytes it was fed are the header's, then L{rest}; a header it reads is
written back by C{encode} (or C{encode_unknown}) as one that reads the same.  Each input is the
byte stream a load balancer sends, fed whole and again in reads cut at points drawn from the
input's CRC.  Any other exception, or a broken invariant (AssertionError), is a finding.

    python conformance/fuzz/proxy_fuzz.py --make-corpus DIR   # seed DIR with good headers
    python conformance/fuzz/proxy_fuzz.py DIR [libFuzzer options]

Without atheris, C{TestOneInput} is plain Python: C{tests/test_fuzz_proxy.py} runs it under
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
    from nfltr.wire.proxy_protocol import (
        V1,
        V2,
        ProxyHeader,
        ProxyHeaderError,
        ProxyHeaderParser,
        encode,
        encode_unknown,
    )


def outcome(chunks: list[bytes]) -> tuple[str, object, bytes]:
    """
    Feed C{chunks} to a new parser, checking the contract; say how it ended, and what came
    after a header.
    """
    parser = ProxyHeaderParser()
    fed = b""
    for i, chunk in enumerate(chunks):
        fed += chunk
        try:
            header = parser.feed(chunk)
        except ProxyHeaderError as e:
            return ("error", str(e), b"")
        if header is not None:
            assert isinstance(header, ProxyHeader), header
            rest = parser.rest + b"".join(chunks[i + 1:])
            assert fed.endswith(parser.rest), (fed, parser.rest)
            return ("header", header, rest)
    return ("need", None, b"")


def TestOneInput(data: bytes) -> None:
    """
    One input: whole, then split; a header read is written back and read the same.
    """
    if not data:
        return
    rng = random.Random(zlib.crc32(data))
    cuts = sorted({rng.randrange(1, len(data) + 1) for _ in range(rng.randrange(8))})
    chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=False) if a < b]
    whole = outcome([data])
    split = outcome(chunks)
    assert whole[0] == split[0], (whole, split, cuts)
    if whole[0] != "header":
        return
    assert whole[1:] == split[1:], (whole, split, cuts)
    header = whole[1]
    assert isinstance(header, ProxyHeader)
    for version in (V1, V2):
        if header.source is None or header.destination is None:
            again = encode_unknown(version)
        else:
            again = encode(version, header.source, header.destination)
        assert outcome([again])[1] == (header if header.source is not None
                                       else ProxyHeader(None, None)), (header, version)


def make_corpus(directory: Path) -> None:
    """
    Write good headers of both versions, with bytes after some, into C{directory}.
    """
    directory.mkdir(parents=True, exist_ok=True)
    seeds = {
        "v1-tcp4": encode(V1, ("192.0.2.1", 5555), ("10.0.0.1", 80)) + b"GET /",
        "v1-tcp6": encode(V1, ("2001:db8::1", 1), ("2001:db8::2", 2)),
        "v1-unknown": encode_unknown(V1),
        "v2-tcp4": encode(V2, ("192.0.2.1", 5555), ("10.0.0.1", 80)) + b"\x16\x03\x01",
        "v2-tcp6": encode(V2, ("2001:db8::1", 1), ("2001:db8::2", 2)),
        "v2-local": encode_unknown(V2),
    }
    for name, seed in seeds.items():
        (directory / name).write_bytes(seed)
        print(directory / name)


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
