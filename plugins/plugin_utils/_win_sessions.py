# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The interactive sessions `quser` (query user) lists, and the argv that logs one of them off.

quser's header, its STATE words and its dates are localized, and the header is sometimes missing: a row is found by
its shape (a session id, then three more fields), the id being the anchor. It exits 1, with a localized line on
stderr, when nobody is logged on: the exit status decides, the line is kept for the report. It cuts user names at 20 characters.
"""

from __future__ import annotations

import re
from collections import namedtuple

RC_NOBODY = 1
_ERROR_NUMBER_RE = re.compile(r"0x[0-9A-Fa-f]{4,}|\[\d+\]|\b\d{3,}\b")

Sessions = namedtuple("Sessions", "status sessions message")


def quser_argv():
    """argv listing every session."""
    return ["quser"]


def logoff_argv(session_id):
    """argv logging one session off by its id."""
    if isinstance(session_id, bool) or not isinstance(session_id, int) or session_id < 0:
        raise ValueError("not a session id: %r" % (session_id,))
    return ["logoff", str(session_id)]


def parse_quser(stdout, rc, stderr=""):
    """-> Sessions(status, sessions, message), status "ok" or "unrecognised".

    session: {"user", "session_name" (None when blank: a disconnected session), "id", "state" (as printed,
    localized), "idle" (as printed), "logon_time" (as printed), "current" (the '>' row: the caller's session)}.
    """
    lines = [line for line in stdout.splitlines() if line.strip()]
    parsed = [(line, _session(line)) for line in lines]
    sessions = [session for _line, session in parsed if session is not None]
    others = [line.strip() for line, session in parsed if session is None]
    said = (stderr.strip() or stdout.strip()) or None
    if rc == RC_NOBODY and not sessions and not _ERROR_NUMBER_RE.search(said or ""):
        # Exit 1 with no session row is nobody logged on, whatever language the line is in; an error quser reports
        # carries its number (Error 0x000006BA, [1722]), in every language.
        return Sessions("ok", [], said)
    if rc != 0:
        return Sessions("unrecognised", sessions, "quser exited %s: %s" % (rc, (stderr or stdout).strip()))
    if len(others) > 1 or (others and not _is_header(others[0])):
        return Sessions("unrecognised", sessions, " / ".join(others))
    return Sessions("ok", sessions, None)


def sessions_of(sessions, user):
    """The sessions of `user` (case-insensitive; a domain prefix ignored; quser's 20-character cut allowed for)."""
    wanted = user.split("\\")[-1].lower()
    return [session for session in sessions
            if session["user"].lower() == wanted or (len(session["user"]) == 20 and wanted.startswith(session["user"].lower()))]


def _session(line):
    current = line.startswith(">")
    tokens = line[1:].split() if current else line.split()
    at = next((at for at, token in enumerate(tokens) if at >= 1 and token.isdigit()), None)
    if at is None or at > 2 or len(tokens) < at + 4:
        return None
    return {"user": tokens[0], "session_name": tokens[1] if at == 2 else None,
            "id": int(tokens[at]), "state": tokens[at + 1], "idle": tokens[at + 2],
            "logon_time": " ".join(tokens[at + 3:]), "current": current}


def _is_header(line):
    return not any(token.isdigit() for token in line.split())
