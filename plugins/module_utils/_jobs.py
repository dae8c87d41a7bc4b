# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a holder belongs to a live scheduler job on this node, as the scheduler says: a running job's process is
busy, not stuck.

The cgroup path (`job_<id>`, `pod<uid>`) is only a hint of which job to ask about: Slurm confirms it (`scontrol
listpids <id>` lists the job's pids on this node, through its slurmd; `squeue` gives the job's state), the CRI runtime
confirms a pod (`crictl pods --label io.kubernetes.pod.uid=<uid> --state ready`). A node without the scheduler's
tools has no scheduler: its holders are classed as before.
"""

from __future__ import annotations

# Slurm job states in which the job still runs on its nodes (its processes are the job's, not leftovers).
LIVE_SLURM_STATES = ("RUNNING", "SUSPENDED", "STOPPED", "CONFIGURING", "RESIZING", "SIGNALING")


def listpids_argv(scontrol, job_id):
    return [scontrol, "listpids", str(job_id)]


def job_state_argv(squeue, job_id):
    return [squeue, "--noheader", "--jobs", str(job_id), "--format", "%T"]


def pod_argv(crictl, pod_uid):
    return [crictl, "pods", "--label", "io.kubernetes.pod.uid=%s" % pod_uid, "--state", "ready", "--quiet"]


def parse_listpids(text):
    """{pid: job id} from `scontrol listpids` (header `PID JOBID STEPID LOCALID GLOBALID`, one line per process)."""
    pids = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0].isdigit() and fields[1].isdigit():
            pids[int(fields[0])] = fields[1]
    return pids


def parse_job_state(text):
    """The job state squeue printed (RUNNING, COMPLETING, ...), upper case; None when it printed none."""
    states = [line.strip().upper() for line in text.splitlines() if line.strip()]
    return states[0] if states else None


def slurm_job_live(pid, job_id, listpids_rc, listpids_out, squeue_rc, squeue_out):
    """{"scheduler": "slurm", "id", "state", "running", "why"} from the two answers for a holder whose cgroup names
    job_id: running only when slurmd lists pid in that job on this node and the job's state is live."""
    listed = parse_listpids(listpids_out) if listpids_rc == 0 else {}
    state = parse_job_state(squeue_out) if squeue_rc == 0 else None
    if listed.get(pid) != str(job_id):
        why = "slurmd does not list pid %s in job %s on this node" % (pid, job_id)
        return {"scheduler": "slurm", "id": str(job_id), "state": state, "running": False, "why": why}
    running = state in LIVE_SLURM_STATES
    why = "Slurm job %s is %s on this node" % (job_id, state or "unknown to squeue")
    return {"scheduler": "slurm", "id": str(job_id), "state": state, "running": running, "why": why}


def pod_live(pod_uid, rc, out):
    """{"scheduler": "kubernetes", "id", "state", "running", "why"} from crictl's answer for the pod uid."""
    running = rc == 0 and bool(out.strip())
    return {"scheduler": "kubernetes", "id": pod_uid, "state": "ready" if running else None, "running": running,
            "why": "pod %s %s" % (pod_uid, "runs on this node (crictl: ready)" if running else "is not running on this node")}


class JobProbe:
    """Asks the node's schedulers about the holders whose cgroup hints at a job; each job asked once."""

    def __init__(self, module):
        self.module = module
        self.scontrol = module.get_bin_path("scontrol")
        self.squeue = module.get_bin_path("squeue")
        self.crictl = module.get_bin_path("crictl")
        self._listpids = {}
        self._states = {}
        self._pods = {}

    @property
    def scheduler(self):
        """The schedulers this node has tools for, or [] (then every holder keeps today's classes)."""
        return [name for name, tool in (("slurm", self.scontrol and self.squeue), ("kubernetes", self.crictl)) if tool]

    def job_of(self, holder):
        """The live-job record of a holder (see slurm_job_live, pod_live), or None when no scheduler is asked."""
        job_id = holder.get("slurm_job")
        if job_id and self.scontrol and self.squeue:
            if job_id not in self._listpids:
                rc, out, dummy = self.module.run_command(listpids_argv(self.scontrol, job_id))
                self._listpids[job_id] = (rc, out)
                rc, out, dummy = self.module.run_command(job_state_argv(self.squeue, job_id))
                self._states[job_id] = (rc, out)
            return slurm_job_live(holder["pid"], job_id, *(self._listpids[job_id] + self._states[job_id]))
        pod = holder.get("kubernetes_pod_uid")
        if pod and self.crictl:
            if pod not in self._pods:
                rc, out, dummy = self.module.run_command(pod_argv(self.crictl, pod))
                self._pods[pod] = (rc, out)
            return pod_live(pod, *self._pods[pod])
        return None
