# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_interactive_sessions: quser on the captures in fixtures/windows/quser, with and without a header."""

from __future__ import annotations

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _interactive_sessions


def sessions(captures, name):
    result = _interactive_sessions.parse_quser(captures.text("windows", "quser", name), 0)
    assert result.status == "ok" and result.message is None
    return result.sessions


@pytest.mark.parametrize("name, expected", [
    ("header-console-current-marker-phoebe.txt", ("phoebe", "console", 1, "Active", "none", "6/14/2021 11:35 AM", True)),
    ("header-rdp-current-marker-dot-idle.txt", ("administrator", "rdp-tcp#2", 1, "Active", ".", "3/25/2021 9:27 AM", True)),
    ("header-console-no-marker-over-ssh.txt", ("administrator", "console", 1, "Active", "none", "3/25/2024 12:01 PM", False)),
    ("header-disc-blank-sessionname-dotted-date-test-data.txt", ("test", None, 4, "Disc", ".", "04.07.2024 23:24", True)),
])
def test_one_session_under_a_header(captures, name, expected):
    [session] = sessions(captures, name)
    keys = ("user", "session_name", "id", "state", "idle", "logon_time", "current")
    assert tuple(session[key] for key in keys) == expected


@pytest.mark.parametrize("name, idle", [("rdp-sessions-ws2008r2-no-header.txt", [".", "24692+13:29", "8"]),
                                        ("rdp-sessions-ws2019-no-header.txt", ["1", ".", "14"])])
def test_rdp_sessions_without_a_header(captures, name, idle):
    found = sessions(captures, name)
    assert [(s["user"], s["session_name"], s["id"]) for s in found] == [
        ("user1", "rdp-tcp#1", 30), ("user2", "rdp-tcp#111", 42), ("user3", "rdp-tcp#88", 55)]
    assert [s["idle"] for s in found] == idle and not any(s["current"] for s in found)


def test_nobody_logged_on_exits_1_with_a_line_on_stderr(captures):
    line = captures.text("windows", "quser", "no-user-exists-stderr.txt")
    assert _interactive_sessions.parse_quser("", 1, line) == ("ok", [], "No User exists for *")
    assert _interactive_sessions.parse_quser(line, 1) == ("ok", [], "No User exists for *")  # streams merged


@pytest.mark.parametrize("line", ["Kein Benutzer für * vorhanden.", "Aucun utilisateur pour *", "没有 * 的用户", ""])
def test_nobody_is_the_exit_status_whatever_the_language(line):
    assert _interactive_sessions.parse_quser("", 1, line + "\n") == ("ok", [], line or None)


@pytest.mark.parametrize("line", ["Error 0x000006BA enumerating sessionnames", "Fehler [1722]:Der RPC-Server ist nicht verfügbar."])
def test_an_error_number_with_exit_1_is_no_answer(line):
    assert _interactive_sessions.parse_quser("", 1, line).status == "unrecognised"


def test_a_localized_header_and_states_still_give_the_rows():
    text = (" BENUTZERNAME          SITZUNGSNAME       ID  STATUS  LEERLAUF   ANMELDEZEIT\n"
            ">alice                 console             1  Aktiv      Kein   14.06.2021 11:35\n"
            " bob                                       3  Getr.         5   14.06.2021 09:02\n")
    result = _interactive_sessions.parse_quser(text, 0)
    assert result.status == "ok"
    assert [(s["user"], s["session_name"], s["id"], s["state"]) for s in result.sessions] == [
        ("alice", "console", 1, "Aktiv"), ("bob", None, 3, "Getr.")]


def test_other_text_is_unrecognised():
    assert _interactive_sessions.parse_quser("Error 0x000006BA enumerating sessionnames\n", 1).status == "unrecognised"
    assert _interactive_sessions.parse_quser("something\nelse\n", 0).status == "unrecognised"


def test_sessions_of_a_user_ignore_case_domain_and_the_20_character_cut(captures):
    found = sessions(captures, "rdp-sessions-ws2008r2-no-header.txt")
    assert [s["id"] for s in _interactive_sessions.sessions_of(found, "CORP\\User2")] == [42]
    long_name = [{"user": "a-very-long-username", "id": 7}]
    assert _interactive_sessions.sessions_of(long_name, "a-very-long-username-2") == long_name
    assert _interactive_sessions.sessions_of(found, "user") == []


def test_logoff_argv():
    assert _interactive_sessions.logoff_argv(42) == ["logoff", "42"]
    assert _interactive_sessions.quser_argv() == ["quser"]
    for bad in (-1, True, "42", None):
        with pytest.raises(ValueError, match="not a session id"):
            _interactive_sessions.logoff_argv(bad)


def test_quser_reads_a_user_name_with_a_space():
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _interactive_sessions
    header = " USERNAME              SESSIONNAME        ID  STATE   IDLE TIME  LOGON TIME\n"
    active = _interactive_sessions.parse_quser(header + ">john smith            console             1  Active      none   6/14/2026 11:35 AM\n", 0)
    assert active.status == "ok" and active.sessions[0]["user"] == "john smith"
    disconnected = _interactive_sessions.parse_quser(header + " john smith                        2  Disc            .  04.07.2024 23:24\n", 0)
    # was: user "john", session name "smith": `logoff user=john` logged John Smith off
    assert [s["user"] for s in disconnected.sessions] == ["john smith"]


def test_a_non_ascii_user_name_from_quser_in_the_oem_code_page_is_read():
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _output_encoding
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _interactive_sessions
    raw = (" USERNAME              SESSIONNAME        ID  STATE   IDLE TIME  LOGON TIME\r\n"
           ">jos\u00e9                  console             1  Activo      none   14/06/2026 11:35\r\n").encode("cp850")
    text = _output_encoding.decode_transported(raw.decode(_output_encoding.TRANSPORT_ENCODING)).text
    sessions = _interactive_sessions.parse_quser(text, 0).sessions
    assert _interactive_sessions.sessions_of(sessions, "jos\u00e9"), sessions  # was: user 'jos\x82', no session of josé
