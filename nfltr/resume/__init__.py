# -*- test-case-name: tests.resume -*-
"""
Resumable sessions: tcp-connect and the agent number, acknowledge and keep their bytes so that a
session outlives the link (and the relay) between them. Sans-I/O; the format is section 18 of
C{docs/link-protocol.md}.
"""

from ._records import (
    MAX_RECORD_DATA,
    MAX_SENT_DATA,
    RECORD_ABORT,
    RECORD_ACK,
    RECORD_DATA,
    RECORD_FIN,
    RECORD_HEADER_SIZE,
    RECORD_RESUME,
    RECORD_TOKEN,
    TOKEN_SIZE,
    Abort,
    Ack,
    Data,
    Fin,
    Record,
    RecordDecoder,
    RecordError,
    Resume,
    Token,
    encode,
    encode_data,
)
from ._stream import (
    DEFAULT_RESUME_WINDOW,
    MIN_RESUME_WINDOW,
    Phase,
    Received,
    ResumableStream,
    ResumeRefused,
)
from ._table import (
    DEFAULT_RESUME_TIMEOUT,
    MAX_RESUME_TIMEOUT,
    MIN_RESUME_TIMEOUT,
    RESUME_RETRY,
    ResumeTable,
    check_resume_timeout,
)

__all__ = [
    "DEFAULT_RESUME_TIMEOUT", "DEFAULT_RESUME_WINDOW", "MAX_RECORD_DATA", "MAX_RESUME_TIMEOUT",
    "MAX_SENT_DATA",
    "MIN_RESUME_TIMEOUT", "MIN_RESUME_WINDOW", "RECORD_ABORT", "RECORD_ACK", "RECORD_DATA",
    "RECORD_FIN", "RECORD_HEADER_SIZE", "RECORD_RESUME", "RECORD_TOKEN", "RESUME_RETRY",
    "TOKEN_SIZE", "Abort",
    "Ack", "Data", "Fin", "Phase", "Received", "Record", "RecordDecoder", "RecordError",
    "ResumableStream", "ResumeRefused", "ResumeTable", "Resume", "Token", "check_resume_timeout",
    "encode", "encode_data",
]
