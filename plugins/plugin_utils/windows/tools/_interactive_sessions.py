# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The interactive sessions of a Windows node, and the argv that logs one of them off.

`read` asks the Remote Desktop Services API first (the sessions script: WTSEnumerateSessions, each session's user
and domain as Windows keeps them, state as a number); only where Add-Type is refused (or the script fails) does it
read `quser` (query user).

quser's header, its STATE words and its dates are localized, and it writes the console's OEM code page (decoded by
_output_encoding with the host's). A user name may hold a space ("john smith"): where the header is there, the user name
is the USERNAME column, cut at the start of the next column (the header's own positions, in any language); the rest of
a row is found by its shape (a session id, then three more fields), the id being the anchor. Without a header (the
captures trimmed by whoever posted them) the user name is the first word. quser exits 1, with a localized line on
stderr, when nobody is logged on: the exit status decides, the line is kept for the report. It cuts user names at 20
characters; the API does not.
"""

from __future__ import annotations

import re
from collections import namedtuple

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _convertto_json
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import WindowsNodeError as _NodeError

RC_NOBODY = 1
_ERROR_NUMBER_RE = re.compile(r"0x[0-9A-Fa-f]{4,}|\[\d+\]|\b\d{3,}\b")

Sessions = namedtuple("Sessions", "status sessions message")
# Where the sessions came from: "wts" (the API), "quser" (its columns, where Add-Type is refused).
SessionsRead = namedtuple("SessionsRead", "status sessions message source")

SCRIPT = "sessions"
# WTS_CONNECTSTATE_CLASS, as quser words it (English here, whatever the host's language: the number decides).
WTS_STATES = {0: "Active", 1: "Conn", 2: "ConnQ", 3: "Shadow", 4: "Disc", 5: "Idle", 6: "Listen", 7: "Reset", 8: "Down", 9: "Init"}


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
    columns = _columns(lines[0]) if lines and _session(lines[0]) is None else None
    parsed = [(line, _session(line, columns)) for line in lines]
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
    """The sessions of `user` (case-insensitive; quser's 20-character cut allowed for). A domain prefix (WS12\\ada) must
    name the session's domain where the session API gave one (CORP\\ada is another user than the local WS12\\ada);
    quser gives none, and then the prefix is ignored."""
    domain, dummy, name = user.rpartition("\\")
    wanted, domain = name.lower(), domain.strip().lower()
    return [session for session in sessions
            if (session["user"].lower() == wanted or (len(session["user"]) == 20 and wanted.startswith(session["user"].lower())))
            and (not domain or domain == "." or not session.get("domain") or session["domain"].lower() == domain)]


def unproven(session, user, processes):
    """Why quser's row does not show that `session` is `user`'s, or None when it does (or the session API gave it).

    quser cuts names at 20 characters and prints no domain: svc-render-node-0001 and svc-render-node-0002 are the same
    row, and so are CORP\\bob and WS12\\bob. Where the row's name is cut or `user` names a domain, the session is
    the user's only when a process running in it (`processes`: Win32_Process with its owner) is owned by that user."""
    if "domain" in session:
        return None
    domain, dummy, name = user.rpartition("\\")
    domain = domain.strip().lower()
    domain = "" if domain == "." else domain
    if session["user"].lower() == name.lower() and not domain:
        return None
    for process in processes:
        owner_domain, dummy, owner = (process.get("user") or "").rpartition("\\")
        if process.get("session_id") == session["id"] and owner.lower() == name.lower() \
                and (not domain or owner_domain.lower() == domain):
            return None
    return ("quser lists it as %s (names cut at 20 characters, no domain): it cannot tell %s from another user, and no "
            "process in the session is known to be %s's (the session API, which needs Add-Type, gives whole names)"
            % (session["user"], user, user))


def _columns(header):
    """Where the header's columns start: a column starts after a gap of two blanks or more (single blanks sit inside
    "IDLE TIME"); None when the header has fewer than two columns."""
    starts = [match.start(1) for match in re.finditer(r"(?:^\s*|\s{2,})(\S)", header)]
    return starts if len(starts) >= 2 else None


def _session(line, columns=None):
    current = line.startswith(">")
    body = " " + line[1:] if current else line
    user = None
    if columns is not None:
        # The USERNAME column runs to where the SESSIONNAME column starts; a row shifted by a blank (a header logged
        # without its leading blank) is cut at the start of the word the boundary falls in.
        split = columns[1]
        while 0 < split < len(body) and not body[split - 1].isspace() and not body[split].isspace():
            split -= 1
        user, rest = body[:split].strip(), body[split:].split()
        tokens = [user] + rest if user else []
    else:
        tokens = body.split()
    at = next((at for at, token in enumerate(tokens) if at >= 1 and token.isdigit()), None)
    if at is None or at > 2 or len(tokens) < at + 4:
        return None
    return {"user": tokens[0], "session_name": tokens[1] if at == 2 else None,
            "id": int(tokens[at]), "state": tokens[at + 1], "idle": tokens[at + 2],
            "logon_time": " ".join(tokens[at + 3:]), "current": current}


def parse_wts(answer):
    """The sessions script's $Ansible.Result -> SessionsRead("ok", sessions, None, "wts"), or None when the script could
    not compile its API calls (Add-Type refused: `quser` is read instead). Only sessions with a user are listed, as quser
    lists them (the services' session 0 and the listeners have none). session: as parse_quser's, with "domain"; "state"
    the English word of the WTS state number, "idle" and "logon_time" None (the API's figures are not read)."""
    if answer.get("unavailable"):
        return None
    own = _convertto_json.integer(answer.get("own_session"))
    sessions = []
    for item in _convertto_json.objects(answer.get("sessions") or "[]"):
        session_id, user = _convertto_json.integer(item.get("SessionId")), item.get("UserName")
        if session_id is None or not isinstance(user, str) or not user.strip():
            continue
        state = _convertto_json.integer(item.get("State"))
        station = item.get("WinStationName")
        sessions.append({"user": user, "domain": item.get("DomainName") or None,
                         "session_name": station if isinstance(station, str) and station.strip() else None,
                         "id": session_id, "state": WTS_STATES.get(state, str(state)), "state_number": state, "idle": None,
                         "logon_time": None, "current": bool(own) and own == session_id})
    return SessionsRead("ok", sessions, None, "wts")


def read(node):
    """The node's sessions -> SessionsRead(status, sessions, message, source): from the API where the sessions script
    runs, else from quser's columns (source "quser"; message says why the API was not used)."""
    try:
        answer = node.powershell(SCRIPT, {}, read_only=True)
        found = parse_wts(answer)
    except _NodeError as exc:
        # WTSEnumerateSessions refused (its Win32 error) or the script failed: quser answers instead (a dropped
        # connection fails quser too, and is raised from there)
        found, why = None, "the sessions script failed (%s): quser's columns read instead" % exc
    except ValueError as exc:
        found, why = None, "the sessions script's answer is not readable (%s): quser's columns read instead" % exc
    else:
        why = "the session API could not be compiled (%s): quser's columns read instead" % answer.get("unavailable")
    if found is not None:
        return found
    listed = node.command(quser_argv(), read_only=True)
    parsed = parse_quser(listed.stdout, listed.rc, listed.stderr)
    return SessionsRead(parsed.status, parsed.sessions, parsed.message or why, "quser")


def _is_header(line):
    return not any(token.isdigit() for token in line.split())
