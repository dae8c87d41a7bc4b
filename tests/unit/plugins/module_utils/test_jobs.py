# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_jobs: a scheduler hint in a cgroup path is only a hint; one a user made in the subtree systemd delegates to them
(user@UID.service) names no job at all (issue 17 rule 8: a user cannot shield a leftover by naming a live pod or job)."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils.scheduler._jobs import JobProbe
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._cgroup import parse_cgroup

POD = "0043435f-1854-4327-b76b-730f681a781d"
REAL_POD = "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod%s.slice/cri-containerd-%s.scope\n" % (
    POD.replace("-", "_"), "a" * 64)
FAKE_POD = ("0::/user.slice/user-1000.slice/user@1000.service/kubepods-besteffort-pod%s.slice/leftover.scope\n"
            % POD.replace("-", "_"))
FAKE_JOB = "0::/user.slice/user-1000.slice/user@1000.service/uid_1000/job_123/step_0\n"


class Module:
    """Answers as a node where crictl says the pod is ready, and scontrol/squeue as given."""

    def __init__(self, slurm=False, slurm_answers=True):
        self.slurm = slurm
        self.slurm_answers = slurm_answers
        self.calls = []

    def get_bin_path(self, name):
        if name == "crictl" or (self.slurm and name in ("scontrol", "squeue")):
            return "/usr/bin/" + name
        return None

    def run_command(self, argv):
        self.calls.append(argv)
        if argv[0].endswith("crictl"):
            return 0, "b" * 64 + "\n", ""
        if argv[0].endswith("scontrol"):
            if not self.slurm_answers:
                return 1, "", "slurm_load_ctl_conf error: Unable to contact slurm controller"
            return 1, "", "No job steps exist on this node"
        return 0, "", ""


def _proc(tmp_path, pid, cgroup):
    (tmp_path / str(pid)).mkdir()
    (tmp_path / str(pid) / "cgroup").write_text(cgroup)
    return str(tmp_path)


def test_a_process_in_a_running_pods_cgroup_is_busy(tmp_path):
    proc_root = _proc(tmp_path, 4242, REAL_POD)
    job = JobProbe(Module(), proc_root=proc_root).job_of(4242, parse_cgroup(REAL_POD))
    assert job["scheduler"] == "kubernetes" and job["running"] is True


def test_a_pod_named_in_a_users_delegated_subtree_shields_nothing(tmp_path):
    assert parse_cgroup(FAKE_POD)["kubernetes_pod_uid"] == POD  # the path alone names the live pod
    proc_root = _proc(tmp_path, 4242, FAKE_POD)
    module = Module()
    job = JobProbe(module, proc_root=proc_root).job_of(4242, parse_cgroup(FAKE_POD))
    assert job is None or job["running"] is False, job


def test_a_slurm_job_named_in_a_users_delegated_subtree_shields_nothing_when_slurm_cannot_answer(tmp_path):
    assert parse_cgroup(FAKE_JOB)["slurm_job"] == "123"
    proc_root = _proc(tmp_path, 4242, FAKE_JOB)
    job = JobProbe(Module(slurm=True, slurm_answers=False), proc_root=proc_root).job_of(4242, parse_cgroup(FAKE_JOB))
    assert job is None or job["running"] is False, job
