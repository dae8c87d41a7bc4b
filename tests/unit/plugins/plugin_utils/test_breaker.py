# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet-wide circuit breaker's decision and the state it reads, and real processes racing for its last place."""

import fcntl
import json
import os
import stat
import subprocess
import sys
import time

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.journal._evidence import CLOCK_SLACK_SECONDS
from ansible_collections.gpuops.remediation.plugins.plugin_utils._breaker import (
    breaker_limit, breaker_refusal, counted_rung, default_node_name, host_is_back, kubernetes_out, prepare_state_dir, read_records, record_name,
    recorded_out, remove_record, slurm_drains_to_confirm, slurm_out, unread_note,
)
from ansible_collections.gpuops.remediation.plugins.filter.ladder import needs_destructive_rung
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_decisions import first_rung
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_options import WalkOptions
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded
from ansible_collections.gpuops.remediation.tests.unit.helpers.ladder_node import BUSY, ORPHAN, Node

REASON = "gpuops: reclaiming stuck GPU memory"


def test_limit_share_rounds_down_allows_one_and_count_wins_when_lower():
    assert breaker_limit(10, 20, 0) == 2
    assert breaker_limit(10, 25, 0) == 2
    assert breaker_limit(3, 20, 0) == 1
    assert breaker_limit(10, 50, 3) == 3
    assert breaker_limit(10, 0, 4) == 4
    assert breaker_limit(10, 0, 0) is None


def test_ten_nodes_at_twenty_percent_two_pass_then_refused_naming_the_nodes_out():
    out = {}
    passed, refused = [], []
    for index in range(10):
        host = "node%02d" % index
        refusal = breaker_refusal(host, out, 10, 20, 0, 60)
        if refusal:
            refused.append((host, refusal))
        else:
            passed.append(host)
            out[host] = "reset rung by run r, 0 min ago"
    assert passed == ["node00", "node01"]
    assert len(refused) == 8
    host, refusal = refused[0]
    assert refusal.startswith("circuit breaker: 2 of the 10 nodes of the fleet are already out: node00 (reset rung")
    assert "node01 (" in refusal and "would make 3, more than the 2 allowed (gpu_remediate_breaker_max_percent=20" in refusal
    assert "Nothing was done on node02" in refusal


def test_the_host_itself_is_not_counted_twice_and_no_limit_never_refuses():
    out = {"a": "x", "b": "y"}
    assert breaker_refusal("a", out, 10, 20, 0, 60) == ""
    assert breaker_refusal("c", out, 10, 0, 0, 60) == ""
    assert breaker_refusal("c", out, 10, 0, 2, 60).startswith("circuit breaker: 2 of the 10")


def test_records_within_the_window_only(tmp_path):
    for host, epoch in (("a", 1000.0), ("b", 4000.0), ("c/../x", 4500.0)):
        (tmp_path / record_name(host)).write_text(json.dumps({"host": host, "epoch": epoch, "run": "r", "rung": "reset"}))
    (tmp_path / "junk.breaker.json").write_text("{not json")
    (tmp_path / "other.txt").write_text("{}")
    records = read_records(str(tmp_path))
    assert sorted(record["host"] for record in records) == ["a", "b", "c/../x"]
    assert sorted(recorded_out(records, 5000.0, 60)) == ["b", "c/../x"]
    assert recorded_out(records, 5000.0, 60)["b"] == "reset rung by run r, 16 min ago"
    assert record_name("node07") == "node07.breaker.json"
    assert record_name("c/../x").startswith("c_.._x-") and record_name("..").startswith("_-")
    assert all(name.endswith(".breaker.json") and "/" not in name for name in (record_name("c/../x"), record_name("..")))
    assert read_records(str(tmp_path / "missing")) == []


FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "scontrol-show-node")


def _cluster(*captures):
    """Real `scontrol --oneliner show node gpunode1` captures, each renamed, joined as the whole cluster's output."""
    lines = []
    for index, name in enumerate(captures):
        with open(os.path.join(FIXTURES, name + ".txt")) as handle:
            line = handle.read().strip("\n")
        lines.append(line.replace("NodeName=gpunode1 ", "NodeName=gpu%02d " % index, 1))
    return "\n".join(lines) + "\n"


def test_slurm_nodes_drained_with_our_whole_reason_only_from_real_scontrol_captures():
    text = _cluster("idle-drain-ours", "mixed-drain-ours", "idle-drain-multiline-reason", "down-drain", "idle", "down",
                    "idle-fail", "idle-drain-maintenance")
    assert slurm_out(text, REASON) == {"gpu00": "drained in Slurm by gpuops run r1", "gpu01": "drained in Slurm by gpuops run r2"}
    assert slurm_out("", REASON) == {} and slurm_out(None, REASON) == {}


def test_slurm_an_admins_line_after_our_reason_is_not_ours_and_forges_no_node():
    """Our reason's line, then an administrator's: read whole, it is not our drain. sinfo printed the later line as a
    line of its own, so that the first line alone looked like ours, and a later line shaped like a record was a node."""
    with open(os.path.join(FIXTURES, "idle-drain-multiline-reason.txt")) as handle:
        line = handle.read().strip("\n")
    forged = line.replace("admin: RMA, do not resume", "gpu99|drained|root|2026-12-01T00:00:00|%s (run x: y)" % REASON)
    assert slurm_out(line + "\n", REASON) == {}
    assert slurm_out(forged + "\n", REASON) == {}


def _capture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def test_slurm_lookalikes_scontrol_shows_as_ours_are_read_again_and_not_counted():
    """An administrator's reason with a trailing newline (scontrol drops it) or a [user@time] stamp of its own: scontrol
    shows both as exactly ours; sinfo %E, read for each such node, shows them as stored, and they do not count."""
    text = "".join(_capture(name + ".txt").replace("NodeName=gpunode9 ", "NodeName=%s " % node, 1).rstrip("\n") + "\n"
                   for name, node in (("idle-drain-trailing-newline", "n1"), ("idle-drain-spoofed-stamp", "n2"),
                                      ("gpunode9-idle-drain-ours", "n3")))
    assert slurm_drains_to_confirm(text, REASON) == ["n1", "n2", "n3"]
    stored = {"n1": _capture("idle-drain-trailing-newline.sinfo"), "n2": _capture("idle-drain-spoofed-stamp.sinfo"),
              "n3": _capture("gpunode9-idle-drain-ours.sinfo")}
    assert slurm_out(text, REASON, stored) == {"n3": "drained in Slurm by gpuops run abc"}
    # Our reason shown once per partition of the node is still ours; a node sinfo no longer shows (gone since) is not.
    assert slurm_out(text, REASON, dict(stored, n3=stored["n3"] * 2)) == {"n3": "drained in Slurm by gpuops run abc"}
    assert slurm_out(text, REASON, dict(stored, n3="")) == {}
    # Not read again (no sinfo), scontrol's reading stands: the breaker counts more, never fewer.
    assert sorted(slurm_out(text, REASON)) == ["n1", "n2", "n3"]


def test_kubernetes_nodes_cordoned_by_us_only():
    nodes = [
        {"metadata": {"name": "k1", "annotations": {"gpuops.io/cordoned-by": REASON}}, "spec": {"unschedulable": True}},
        {"metadata": {"name": "k2", "annotations": {"gpuops.io/cordoned-by": REASON}}, "spec": {}},
        {"metadata": {"name": "k3"}, "spec": {"unschedulable": True}},
    ]
    assert kubernetes_out(nodes, "gpuops.io/cordoned-by", REASON) == {"k1": "cordoned in Kubernetes by gpuops"}


# Real snapshots (judged by the real verdict), so that the breaker asks the walk's own questions of them.
LEFT_BEHIND = Node([{"ghost": 0}], holders=[ORPHAN]).snapshot()  # the kill rung
GHOST = Node([{"ghost": 3072}]).snapshot()  # the reset rung
HEALTHY = Node([{"ghost": 0}]).snapshot()
LOST = Node([{"ghost": 0}], lost=True).snapshot()  # only a reboot brings it back
DESTRUCTIVE = ["reset", "reload", "graphics", "reboot"]


def test_counted_rung_only_destructive_and_not_refused_by_the_walk():
    assert [GHOST["verdict"]["rung"], LEFT_BEHIND["verdict"]["rung"], HEALTHY["verdict"]["rung"], LOST["verdict"]["rung"]] == [
        "reset", "kill", "none", "reboot"]
    assert counted_rung(GHOST, "linux", DESTRUCTIVE, "reset", False) == "reset"
    assert counted_rung(LEFT_BEHIND, "linux", DESTRUCTIVE, "reset", False) is None
    assert counted_rung(HEALTHY, "linux", DESTRUCTIVE, "reset", False) is None
    # A lost GPU without gpu_reclaim_allow_reboot: the walk refuses before any rung, the breaker counts nothing
    assert counted_rung(LOST, "linux", DESTRUCTIVE, "reboot", False) is None
    assert counted_rung(LOST, "linux", DESTRUCTIVE, "reboot", True) == "reboot"
    # Evidence that needs a rung above max_rung: refused by the walk, not counted
    assert counted_rung(LOST, "linux", DESTRUCTIVE, "reset", False) is None


def test_counted_rung_is_the_walks_first_rung_under_the_runs_options():
    """A working program beside a left-behind holder: the kill rung ends only the left-behind one (not destructive),
    unless end_running_jobs ends the program too - then the rung is destructive, and counted, as the fleet guard counts
    it. A host fixed only partly by light rungs (max_rung kill) takes no destructive rung."""
    beside = Node([{"ghost": 0}], holders=[ORPHAN, BUSY]).snapshot()
    assert counted_rung(beside, "linux", DESTRUCTIVE, "reset", False) is None
    assert counted_rung(beside, "linux", DESTRUCTIVE, "reset", False, end_running_jobs=True) == "kill"
    for end_running_jobs in (False, True):
        options = WalkOptions.before_walk(max_rung="reset", destructive_rungs=DESTRUCTIVE, end_running_jobs=end_running_jobs)
        assert needs_destructive_rung(beside, DESTRUCTIVE, "linux", None, end_running_jobs, "reset") is end_running_jobs
        assert first_rung(beside, options) == "kill"
    partly = Node([{"ghost": 0}, {"ghost": 3072}], holders=[ORPHAN]).snapshot()
    assert counted_rung(partly, "linux", DESTRUCTIVE, "kill", False) is None
    assert counted_rung(partly, "linux", DESTRUCTIVE, "reset", False) == "reset"


def test_two_hosts_whose_names_make_the_same_safe_name_keep_two_records(tmp_path):
    """One record per host: "a/b", "a_b", "fe80::1" and "fe80__1" must not overwrite each other (one more out uncounted)."""
    hosts = ("a/b", "a_b", "fe80::1", "fe80__1", ".x", "x")
    assert len(set(record_name(host) for host in hosts)) == len(hosts)
    for host in hosts:
        (tmp_path / record_name(host)).write_text(json.dumps({"host": host, "epoch": 1000.0, "run": "r", "rung": "reset"}))
    assert sorted(recorded_out(read_records(str(tmp_path)), 1000.0, 60)) == sorted(hosts)


def test_a_record_dated_after_now_counts_and_the_window_edges():
    """Controllers sharing the state directory disagree on the clock by seconds: a record 5 s ahead is recent, not
    ignored (ignoring it let two runs both pass). One further ahead than the journal's clock slack was written under a
    wrong clock and counts for nothing, as a journal line does (review20: a record a year ahead held its place for a
    year). The window's edge: 60 min ago counts, a second more does not."""
    records = [{"host": "ahead", "epoch": 1005.0, "run": "r", "rung": "reset"},
               {"host": "slack", "epoch": 1000.0 + CLOCK_SLACK_SECONDS, "run": "r", "rung": "reset"},
               {"host": "year", "epoch": 1000.0 + 365 * 86400, "run": "r", "rung": "reset"},
               {"host": "edge", "epoch": 1000.0 - 3600, "run": "r", "rung": "reset"},
               {"host": "gone", "epoch": 1000.0 - 3601, "run": "r", "rung": "reset"},
               {"host": "bool", "epoch": True, "run": "r", "rung": "reset"}]
    out = recorded_out(records, 1000.0, 60)
    assert sorted(out) == ["ahead", "edge", "slack"]
    assert out["ahead"] == "reset rung by run r, 0 min ago"


def test_share_and_count_at_their_edges():
    assert breaker_limit(1, 20, 0) == 1 and breaker_refusal("a", {}, 1, 20, 0, 60) == ""
    assert breaker_limit(10, 100, 0) == 10
    assert breaker_refusal("j", dict(("n%d" % i, "x") for i in range(9)), 10, 100, 0, 60) == ""
    assert breaker_refusal("k", dict(("n%d" % i, "x") for i in range(10)), 10, 100, 0, 60) != ""
    assert breaker_refusal("b", {"a": "x"}, 1, 100, 0, 60).startswith("circuit breaker: 1 of the 1 node of the fleet is already out")
    assert breaker_limit(10, 19, 0) == 1 and breaker_limit(10, 20, 1) == 1


def test_the_breakers_words_agree_with_their_counts_for_one_and_for_two():
    one = breaker_refusal("n3", {"n1": "reset rung by run r1, 2 min ago"}, 5, 0, 1, 60, unread={"n4": "unreachable: no route"})
    assert one == ("circuit breaker: 1 of the 5 nodes of the fleet is already out: n1 (reset rung by run r1, 2 min ago). A "
                   "destructive rung on n3 would make 2, more than the 1 allowed (gpu_remediate_breaker_max_percent=0, "
                   "gpu_remediate_breaker_max_count=1). Nothing was done on n3. It closes again when nodes come back or their "
                   "records pass the 60-minute window (gpu_remediate_breaker_window_minutes); or raise the limit. circuit "
                   "breaker: the journal of 1 fleet host could not be read, so it is counted neither out nor healthy: n4 "
                   "(unreachable: no route).")
    two = breaker_refusal("n3", {"n1": "a", "n2": "b"}, 5, 0, 2, 60, unread={"n4": "x", "n5": "y"})
    assert two.startswith("circuit breaker: 2 of the 5 nodes of the fleet are already out: n1 (a); n2 (b). A destructive "
                          "rung on n3 would make 3, more than the 2 allowed")
    assert two.endswith(" circuit breaker: the journals of 2 fleet hosts could not be read, so they are counted neither out "
                        "nor healthy: n4 (x); n5 (y).")
    assert unread_note({"n4": "x"}) == ("circuit breaker: the journal of 1 fleet host could not be read, so it is counted "
                                        "neither out nor healthy: n4 (x).")


# ---------------------------------------------------------------- the state directory and the host's release

def test_state_dir_made_0700_and_refused_when_others_can_write_it_or_it_is_not_ours(tmp_path):
    uid = os.geteuid()
    made = str(tmp_path / "home" / ".gpuops" / "breaker")
    assert prepare_state_dir(made, uid, create=False) is None and not os.path.exists(made)  # check mode: nothing made
    assert prepare_state_dir(made, uid, create=True) is None
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o700
    open_dir = str(tmp_path / "open")
    os.mkdir(open_dir)
    os.chmod(open_dir, 0o777)
    said = prepare_state_dir(open_dir, uid, create=True)
    assert said.startswith("state_dir (gpu_remediate_breaker_dir) %r is writable by others (mode 0777)" % open_dir)
    os.chmod(open_dir, 0o1777)  # /tmp's mode: others cannot remove our records, but can add theirs (closing the breaker)
    assert prepare_state_dir(open_dir, uid, create=True).startswith(
        "state_dir (gpu_remediate_breaker_dir) %r is writable by others (mode 1777)" % open_dir)
    os.chmod(open_dir, 0o700)
    linked = str(tmp_path / "linked")
    os.symlink(open_dir, linked)  # a link to a good directory: whoever can change the link can move the records
    assert "is refused: it is a symbolic link or not a directory" in prepare_state_dir(linked, uid, create=True)
    theirs = prepare_state_dir(made, uid + 1, create=True)  # as another user sees a directory that is not theirs
    assert "belongs to uid %d, not to this user (uid %d)" % (uid, uid + 1) in theirs
    a_file = str(tmp_path / "file")
    open(a_file, "w").close()
    assert prepare_state_dir(a_file, uid, create=True) == "state_dir (gpu_remediate_breaker_dir) %r is not a directory" % a_file


@pytest.mark.parametrize("path", ["", "~/.gpuops/breaker", "relative/breaker"])
def test_state_dir_must_be_absolute_never_a_silent_fallback(path):
    assert prepare_state_dir(path, os.geteuid(), create=True) == (
        "state_dir (gpu_remediate_breaker_dir) must be an absolute path on the controller, got %r" % path)


def test_a_host_is_back_when_its_own_snapshot_holds_nothing(tmp_path):
    stuck = {"gpus": [{"index": 0, "state": "stuck"}], "holders": [], "verdict": {"rung": "reset"}}
    healthy = {"gpus": [{"index": 0, "state": "ok"}], "holders": [], "verdict": {"rung": "none"}}
    in_use = {"gpus": [{"index": 0, "state": "in_use"}], "holders": [], "verdict": {"rung": "none"}}
    lost = {"gpus": [], "holders": [], "verdict": {"rung": "reboot"}}
    assert [host_is_back(snapshot) for snapshot in (stuck, healthy, in_use, lost)] == [False, True, True, False]
    directory = str(tmp_path)
    with open(os.path.join(directory, record_name("n1")), "w") as handle:
        json.dump({"host": "n1", "epoch": 1.0}, handle)
    assert remove_record(directory, "n1") and not remove_record(directory, "n1")
    assert read_records(directory) == []


def test_a_host_recorded_and_drained_is_one_node_out_and_its_own_drain_not_counted_against_it():
    """Inventory names are often FQDNs, Slurm's node names short (gpu_reclaim_drain_node_name): the record of
    node07.example.org, kept under node07, and Slurm's drain of node07 are one node; asked again for node07.example.org,
    neither counts against it."""
    records = [{"host": "node07.example.org", "node": "node07", "epoch": 1000.0, "run": "r1", "rung": "reset"},
               {"host": "old-record", "epoch": 1000.0, "run": "r0", "rung": "reset"}]  # written before records had a node
    out = recorded_out(records, 1000.0, 60)
    out.update({"node07": "drained in Slurm by gpuops run r1"})
    assert sorted(out) == ["node07", "old-record"]
    assert breaker_refusal("node07.example.org", out, 10, 20, 0, 60, "node07") == ""
    refusal = breaker_refusal("node09.example.org", out, 10, 20, 0, 60, "node09")
    assert refusal.startswith("circuit breaker: 2 of the 10 nodes of the fleet are already out: node07 (drained in Slurm")
    assert default_node_name("node07.example.org") == "node07" and default_node_name("node07") == "node07"


# ---------------------------------------------------------------- the breaker raced by real processes

def _flock_waiters(path):
    """How many other processes have the lock file at path open (their /proc/<pid>/fd): each run opens it, then polls
    for its flock (_lock.flock_within never blocks in the kernel, so /proc/locks lists no waiter)."""
    waiting = 0
    for pid in (name for name in os.listdir("/proc") if name.isdigit() and int(name) != os.getpid()):
        try:
            links = [os.readlink("/proc/%s/fd/%s" % (pid, fd)) for fd in os.listdir("/proc/%s/fd" % pid)]
        except OSError:
            continue
        waiting += path in links
    return waiting


def test_breaker_processes_racing_for_the_last_place_one_passes(tmp_path, collections_root):
    """Four real runs (ansible, the action gpu_breaker) decide at once for the last place of max_count 1: they wait on
    the state directory's lock (held here until all have started) and exactly one passes, three are refused naming it."""
    state = tmp_path / "breaker"
    state.mkdir(mode=0o700)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_root, ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="false", ANSIBLE_NOCOLOR="1", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    # The ad-hoc CLI through this Python (ansible-test's units venv has the ansible package but no `ansible` script).
    ansible = [sys.executable, "-c", "import sys; from ansible.cli.adhoc import main; main(['ansible'] + sys.argv[1:])"]
    snapshot = GHOST
    runs = []
    with open(str(state / ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a fresh file of this test: nobody else holds it
        for host in ("nodeA", "nodeB", "nodeC", "nodeD"):
            args = {"host": host, "fleet_size": 10, "max_count": 1, "state_dir": str(state), "snapshot": snapshot,
                    "max_rung": "reset", "run_id": "race-" + host}
            argv = ansible + ["localhost", "-c", "local", "-m", "gpuops.remediation.gpu_breaker", "-a", json.dumps(args)]
            runs.append(bounded.start(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      universal_newlines=True, cwd=str(tmp_path)))
        # Until the kernel shows all four runs with the lock open, polling for it: none decided, none recorded.
        deadline = time.monotonic() + 120
        while _flock_waiters(str(state / ".lock")) < 4:
            assert time.monotonic() < deadline and all(run.poll() is None for run in runs), \
                [bounded.communicate(run, "an ad-hoc breaker run")[0] for run in runs if run.poll() is not None]
            time.sleep(0.05)
        assert [run.poll() for run in runs] == [None] * 4
        assert [name for name in os.listdir(str(state)) if name.endswith(".breaker.json")] == []
        fcntl.flock(lock, fcntl.LOCK_UN)
    outputs = [bounded.communicate(run, "an ad-hoc breaker run", timeout=120)[0] for run in runs]
    results = []
    for output in outputs:
        assert "localhost | SUCCESS => " in output, output  # ad-hoc's own output: the task's result as JSON
        results.append(json.loads(output[output.index("localhost | SUCCESS => ") + 23:]))
    passed = [result for result in results if result["recorded"]]
    refused = [result for result in results if result["refusal"]]
    assert len(passed) == 1 and len(refused) == 3, results
    records = sorted(name for name in os.listdir(str(state)) if name.endswith(".breaker.json"))
    assert len(records) == 1
    winner = records[0].split(".")[0]
    assert all("%s (reset rung by run race-%s" % (winner, winner) in result["refusal"] for result in refused)
