# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Classes from what the driver and the init system say (_unit_members, _snapshot._holder_class), every protect
entry resolved (_protect_entries), and a running job's process told from a leftover (_jobs), against the node's own
user and group database, real /proc and the fixtures of tests/unit/plugins/fixtures/slurm."""

from __future__ import annotations

import grp
import os
import pwd

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.scheduler._jobs import (
    parse_job_states, parse_listpids, pod_live, slurm_job, slurm_pids)
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._protect_entries import (
    ProtectEntryError, ProtectedUsers, check_entries, check_selected_users, check_units, process_gids)
from ansible_collections.gpuops.remediation.plugins.module_utils._snapshot import _holder_class
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._unit_members import (
    DAEMON, DISPLAY, UnitMembers, in_control_group, member_of, systemd_cgroup)

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "slurm")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


# --- the init system's view ---------------------------------------------------------------------------

def test_systemd_cgroup_prefers_name_systemd_on_v1_and_reads_v2():
    assert systemd_cgroup("0::/system.slice/nvidia-persistenced.service\n") == "/system.slice/nvidia-persistenced.service"
    v1 = "12:memory:/user.slice\n1:name=systemd:/system.slice/gdm.service\n0::/\n"
    assert systemd_cgroup(v1) == "/system.slice/gdm.service"
    assert systemd_cgroup("") is None


@pytest.mark.parametrize("path, group, inside", [
    ("/system.slice/nvidia-persistenced.service", "/system.slice/nvidia-persistenced.service", True),
    ("/system.slice/gdm.service/session", "/system.slice/gdm.service", True),
    # A sibling that shares the prefix, and a user's delegated subtree with the same unit name, are outside.
    ("/system.slice/gdm.service-evil", "/system.slice/gdm.service", False),
    ("/user.slice/user-1000.slice/user@1000.service/app.slice/nvidia-persistenced.service",
     "/system.slice/nvidia-persistenced.service", False),
    ("/", "/", False), ("/x", None, False), (None, "/x", False),
])
def test_in_control_group(path, group, inside):
    assert in_control_group(path, group) is inside


def test_member_of_needs_an_active_unit():
    state = {"active": True, "main_pid": 4242, "control_group": "/system.slice/x.service"}
    assert member_of(4242, state, None) == "main_pid"
    assert member_of(7, state, "/system.slice/x.service") == "control_group"
    assert member_of(7, state, "/user.slice", ancestors=[4242, 1]) == "started_by"
    assert member_of(7, dict(state, active=False), "/system.slice/x.service") is None
    # MainPID 0 (not running) or 1 never makes every process a member.
    assert member_of(7, {"active": True, "main_pid": 1, "control_group": None}, None, ancestors=[1]) is None


def test_unit_members_only_the_display_manager_counts_descendants():
    me = os.getpid()
    parent = os.getppid()
    daemon_parent = UnitMembers({"nvidia-persistenced.service": {"id": "nvidia-persistenced.service", "active": True, "main_pid": parent}})
    assert daemon_parent.role(me) is None
    display_parent = UnitMembers({"display-manager.service": {"id": "gdm.service", "active": True, "main_pid": parent}})
    assert display_parent.role(me) == {"role": DISPLAY, "unit": "gdm.service", "by": "started_by", "asked_as": "display-manager.service"}
    assert UnitMembers({}).role(me) is None and not UnitMembers({}).known


@pytest.mark.parametrize("types, role, expected", [
    ({"C"}, None, "compute"),
    ({"C"}, {"role": DISPLAY}, "compute"),      # a compute context counts whatever the process is
    ({"C", "G"}, {"role": DISPLAY}, "compute"),
    ({"C"}, {"role": DAEMON}, "gpu_daemon"),    # the init system's own GPU daemon
    ({"G"}, None, "graphics_session"),          # the driver says graphics only
    (set(), {"role": DISPLAY}, "graphics_session"),
    (set(), None, "compute"),
])
def test_holder_class_never_from_a_name(types, role, expected):
    record = {"state": "S", "name": "Xorg", "cmdline": ["nvidia-persistenced"]}
    assert _holder_class(record, types, role) == expected


# --- protect entries ----------------------------------------------------------------------------------

def test_protect_users_resolves_users_uids_and_groups():
    me = pwd.getpwuid(os.getuid())
    group = grp.getgrgid(os.getgid())
    users = ProtectedUsers([me.pw_name, "4000000", "@" + group.gr_name, "@%d" % group.gr_gid])
    assert users.uids == {me.pw_uid: me.pw_name, 4000000: "4000000"}
    assert set(users.groups) == {group.gr_gid}
    assert users.why(4000000, None, set()) == "protected user: 4000000"
    assert users.why(4000001, None, {group.gr_gid}).startswith("protected group: @")
    assert users.why(4000001, None, set()) is None
    assert users.why(4000001, None, set(), primary_gid=group.gr_gid).startswith("protected group: @")


@pytest.mark.parametrize("entry, says", [
    ("gpuops-no-such-user", "protect_users: 'gpuops-no-such-user': no user 'gpuops-no-such-user'"),
    ("@gpuops-no-such-group", "protect_users: '@gpuops-no-such-group': no group 'gpuops-no-such-group'"),
    ("@4000000", "no group with gid 4000000"),
    ("@", "names no group"),
    ("", "names nothing"),
    (" root", "leading or trailing blanks"),
    (17, "names nothing"),
    ("4294967295", "'4294967295' is no uid (a uid is 0 to 4294967294)"),
    ("99999999999", "'99999999999' is no uid (a uid is 0 to 4294967294)"),
    ("9" * 5000, "is no uid (a uid is 0 to 4294967294)"),
    ("@4294967295", "'@4294967295' is no gid (a gid is 0 to 4294967294)"),
    ("@" + "9" * 5000, "is no gid (a gid is 0 to 4294967294)"),
])
def test_protect_users_refuses_an_entry_that_names_nobody(entry, says):
    with pytest.raises(ProtectEntryError, match=says.replace("(", r"\(").replace(")", r"\)")):
        ProtectedUsers([entry])


@pytest.mark.parametrize("entry", ["4294967295", "18446744073709551616", "99999999999", "9" * 5000])
def test_a_selection_by_a_number_no_uid_can_be_is_refused(entry):
    """users: a number past the largest uid (4294967295 is (uid_t)-1, no process's) would select no holder and say
    nothing, as an unknown name would; the largest uid and a uid no database names still select."""
    with pytest.raises(ProtectEntryError, match=r"users\[1\]: '%s' is no uid \(a uid is 0 to 4294967294\)" % entry):
        check_selected_users(["0", entry])
    check_selected_users(["4294967294", "4000000"])


def test_protect_options_checked_anywhere_and_units_on_the_node():
    with pytest.raises(ProtectEntryError, match="protect_names: '' names nothing"):
        check_entries({"protect_names": [""]})
    with pytest.raises(ProtectEntryError, match="protect_units: ' ' names nothing"):
        check_entries({"protect_units": [" "]})
    with pytest.raises(ProtectEntryError, match="protect_units: 'nvidia-[*]' is a pattern; name each unit"):
        check_entries({"protect_units": ["nvidia-*"]})
    check_entries({"protect_names": ["a"], "protect_users": ["@g"], "protect_units": ["x.service"]})
    with pytest.raises(ProtectEntryError, match="systemd knows no such unit"):
        check_units(["nope.service"], {"nope.service": {"loaded": False}})
    with pytest.raises(ProtectEntryError, match="no systemctl"):
        check_units(["x.service"], {})
    check_units(["x.service"], {"x.service": {"loaded": True}})
    check_units([], {})


def test_process_gids_reads_the_kernels_credentials():
    assert os.getgid() in process_gids(os.getpid())
    assert set(os.getgroups()) <= process_gids(os.getpid())
    assert process_gids(0) == set()


# --- a running job's process --------------------------------------------------------------------------

def test_listpids_and_state_parsers():
    # Job 1's batch script (14409), two srun processes under it, step 0's task (14425) and its child: every process of
    # every step, a child included (LOCALID -), as slurmd's step daemons know them.
    assert parse_listpids(fixture("scontrol-listpids")) == {14409: "1", 14413: "1", 14410: "1", 14425: "1", 14429: "1"}
    assert parse_job_states(fixture("squeue-states")) == {"1": "RUNNING", "2": "PENDING"}
    assert parse_job_states(fixture("squeue-states-completing")) == {"1": "COMPLETING", "2": "PENDING"}
    assert parse_job_states("") == {}
    # No step on this node is an answer (exit 1, the header on stdout); no configuration is none.
    assert slurm_pids(1, fixture("scontrol-listpids-no-steps.stdout"), fixture("scontrol-listpids-no-steps.stderr")) == (True, {})
    assert slurm_pids(1, "", "scontrol: fatal: Could not establish a configuration source\n") == (False, {})
    assert slurm_pids(0, fixture("scontrol-listpids"), "")[0] is True


def _job(pid, hint, listed=True, states="squeue-states"):
    answered, pids = slurm_pids(0, fixture("scontrol-listpids"), "") if listed else (False, {})
    return slurm_job(pid, hint, answered, pids, parse_job_states(fixture(states)), "fatal: no configuration")


def test_slurm_job_is_running_here_only_when_slurm_says_so():
    assert _job(14425, "1")["running"] and _job(14429, None)["running"]   # listed: the hint is not needed
    assert _job(14429, None)["why"] == "Slurm job 1 is RUNNING on this node"
    # Listed in a job that is completing: its processes are leftovers.
    assert _job(14425, "1", states="squeue-states-completing")["running"] is False
    # The cgroup names job 1, but slurmd does not list the pid: a leftover, or a name a user made.
    outside = _job(31337, "1")
    assert outside["running"] is False and "lists no such process" in outside["why"]
    # Listed nowhere, named by a pending job's hint: not running here.
    assert _job(31337, "2")["running"] is False
    # A process outside every job, with no hint: Slurm has nothing to say of it (ended as before).
    assert _job(31337, None) is None
    # Slurm could not answer: a process whose cgroup names a job is not ended on a guess.
    unknown = _job(31337, "1", listed=False)
    assert unknown["running"] is True and "could not say" in unknown["why"]
    assert _job(31337, None, listed=False) is None


def test_pod_live():
    assert pod_live("0e7f", 0, "5f3a9c1b2d\n")["running"]
    assert not pod_live("0e7f", 0, "")["running"]
    assert not pod_live("0e7f", 1, "whatever")["running"]


def test_selection_busy_is_selected_and_orphans_only_takes_the_schedulers_word():
    from ansible_collections.gpuops.remediation.plugins.module_utils.kill._kill import HolderSelection
    params = {"gpus": None, "classes": ["compute"], "users": None, "min_memory_mib": None, "orphans_only": False, "holders": None}
    busy = {"pid": 1, "class": "busy", "gpus": [0], "slurm_job": "4271", "job": {"running": True}}
    leftover = {"pid": 2, "class": "compute", "gpus": [0], "slurm_job": "4271", "job": {"running": False}}
    hinted = {"pid": 3, "class": "compute", "gpus": [0], "slurm_job": "4271", "job": None}
    plain = {"pid": 4, "class": "compute", "gpus": [0], "job": None}
    every = HolderSelection(params, {})
    assert [h["pid"] for h in (busy, leftover, hinted, plain) if every.matches(h, {0})] == [1, 2, 3, 4]
    orphans = HolderSelection(dict(params, orphans_only=True), {})
    # The job that ended owns nothing; without a scheduler's answer, the cgroup's word stands.
    assert [h["pid"] for h in (busy, leftover, hinted, plain) if orphans.matches(h, {0})] == [2, 4]
