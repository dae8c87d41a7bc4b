# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a holder belongs to a live scheduler job on this node, as the scheduler says: a running job's process is
busy, not stuck.

Slurm says which processes are a job's: `scontrol listpids` lists every process of every job step on this node (its
step daemons know them, whatever the process tracking), `squeue` gives each job's state. The cgroup path (`job_<id>`,
`pod<uid>`) is only a hint: a holder whose cgroup names a job that Slurm does not list is a leftover. A pod is running
when the CRI runtime says so (`crictl pods --label io.kubernetes.pod.uid=<uid> --state ready`). A node without the
scheduler's tools has no scheduler: its holders are classed as before. A hint in a cgroup that lies in a user's delegated
subtree (`user@UID.service`, where any user may create `job_<id>` or `kubepods-pod<uid>.slice` and name a live job or
pod) is no hint: a user cannot shield a leftover behind someone else's job.

A container is a live job when its runtime confirms it (`_container_runtime.ContainerWitness`): it runs, its main
process is alive, and the holder is in its cgroup. A holder of a container the runtime reports stopped or exited, or
whose main process is gone, is a leftover. A runtime that cannot be asked confirms nothing: the holder is a plain
process (no job), as the container rule decides.
"""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils._command import CommandRunner
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._container_runtime import ContainerWitness, delegated_subtree

# Slurm job states in which the job still runs on its nodes (its processes are the job's, not leftovers).
LIVE_SLURM_STATES = ("RUNNING", "SUSPENDED", "STOPPED", "CONFIGURING", "RESIZING", "SIGNALING")


def listpids_argv(scontrol):
    """Every process of every job step on this node, as its slurmd's step daemons know them."""
    return [scontrol, "listpids"]


def job_states_argv(squeue, job_ids):
    return [squeue, "--all", "--noheader", "--jobs", ",".join(sorted(job_ids)), "--format", "%i|%T"]


def pod_argv(crictl, pod_uid):
    return [crictl, "pods", "--label", "io.kubernetes.pod.uid=%s" % pod_uid, "--state", "ready", "--quiet"]


# What scontrol listpids prints (to stderr, exit 1) on a node where no job step runs: an answer, not a failure.
NO_STEPS = "No job steps exist on this node"


def parse_listpids(text):
    """{pid: job id} from `scontrol listpids` (header `PID JOBID STEPID LOCALID GLOBALID`, one line per process)."""
    pids = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0].isdigit() and fields[1].isdigit():
            pids[int(fields[0])] = fields[1]
    return pids


def slurm_pids(rc, out, err):
    """(answered, {pid: job id}) from `scontrol listpids`: answered is False when Slurm could not say (no
    configuration, no spool directory): then no holder can be told a leftover from a job's process."""
    if rc == 0:
        return True, parse_listpids(out)
    if NO_STEPS in (err or ""):
        return True, {}
    return False, {}


def parse_job_states(text):
    """{job id: state} from `squeue --format %i|%T` (upper case)."""
    states = {}
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) == 2 and fields[0].strip():
            states[fields[0].strip()] = fields[1].strip().upper()
    return states


def slurm_job(pid, hint, answered, pids, states, error=None):
    """The Slurm job record of a holder, or None when Slurm has nothing to say of it.

    pid is a running job's process when slurmd lists it in a job (listpids) whose state is live. A holder whose cgroup
    names a job (`hint`) that slurmd does not list on this node is a leftover (running False); when Slurm could not
    answer at all, whether that job runs is unknown (running None), and it is treated as running: nothing is ended
    on a guess.
    """
    job_id = pids.get(pid)
    if job_id is not None:
        state = states.get(job_id)
        running = state in LIVE_SLURM_STATES if state else None
        why = "Slurm job %s %s on this node" % (job_id, ("is " + state) if state else "runs (squeue gave no state)")
        return {"scheduler": "slurm", "id": job_id, "state": state, "running": running is not False, "why": why}
    if not hint:
        return None
    if answered:
        return {"scheduler": "slurm", "id": str(hint), "state": None, "running": False,
                "why": "its cgroup names Slurm job %s, but slurmd lists no such process of it on this node: a leftover" % hint}
    return {"scheduler": "slurm", "id": str(hint), "state": None, "running": True,
            "why": "its cgroup names Slurm job %s, and Slurm could not say whether it runs (%s)" % (hint, error or "no answer")}


def pod_live(pod_uid, rc, out):
    """{"scheduler": "kubernetes", "id", "state", "running", "why"} from crictl's answer for the pod uid."""
    running = rc == 0 and bool(out.strip())
    return {"scheduler": "kubernetes", "id": pod_uid, "state": "ready" if running else None, "running": running,
            "why": "pod %s %s" % (pod_uid, "runs on this node (crictl: ready)" if running else "is not running on this node")}


def container_job(claimed, state, confirmation):
    """The job record of a holder whose cgroup names the container `claimed` ({"runtime", "id"}), or None.

    state: the runtime's inspect answer (_container_runtime.parse_inspect's state, None when it gave none);
    confirmation: ContainerWitness.confirm() of the holder. Running (busy) only when the runtime confirms the container
    with its main process alive; a leftover when the runtime says it is not running or its main process is gone; None
    (no job: a plain process) when the runtime gave no answer, or the holder is not one of its processes.
    """
    what = "%s container %s" % (claimed["runtime"], claimed["id"])
    if confirmation.get("confirmed") and confirmation.get("main_pid"):
        return {"scheduler": "container", "id": claimed["id"], "runtime": claimed["runtime"], "state": "running",
                "running": True, "main_pid": confirmation["main_pid"],
                "why": "%s runs with its main process %d alive" % (what, confirmation["main_pid"])}
    if state is None:
        return None
    if not state.get("running") or state.get("pid") is None or not confirmation.get("main_pid"):
        return {"scheduler": "container", "id": claimed["id"], "runtime": claimed["runtime"],
                "state": "running" if state.get("running") else "not running", "running": False, "main_pid": None,
                "why": "%s: a leftover of it" % confirmation.get("reason")}
    return None


class JobProbe:
    """Asks the node's schedulers, once per run, which processes belong to a live job."""

    def __init__(self, module, proc_root="/proc", witness=None):
        self.module = module
        self.proc_root = proc_root
        # The containers' runtimes, asked through the one witness of the run (its answers are cached).
        self.witness = witness or ContainerWitness(module, proc_root)
        self.scontrol = module.get_bin_path("scontrol")
        self.squeue = module.get_bin_path("squeue")
        self.crictl = module.get_bin_path("crictl")
        self._slurm = None
        self._pods = {}

    def _slurm_view(self):
        if self._slurm is None:
            rc, out, err = CommandRunner(self.module).probe(listpids_argv(self.scontrol))
            answered, pids = slurm_pids(rc, out, err)
            states = {}
            if pids:
                src, sout, dummy = CommandRunner(self.module).probe(job_states_argv(self.squeue, set(pids.values())))
                states = parse_job_states(sout) if src == 0 else {}
            self._slurm = (answered, pids, states, (err or out).strip().splitlines()[-1:] or [None])
        return self._slurm

    def job_of(self, pid, attribution):
        """The live-job record of pid ({"scheduler", "id", "state", "running", "why"}), None when no scheduler of
        this node has anything to say of it (no scheduler, or a process outside every job)."""
        if attribution.get("slurm_job") or attribution.get("kubernetes_pod_uid"):
            try:
                with open("%s/%d/cgroup" % (self.proc_root, pid), "rb") as handle:
                    cgroup = handle.read().decode("utf-8", "replace")
            except OSError:
                cgroup = ""
            if not cgroup or delegated_subtree(cgroup):
                attribution = dict(attribution, slurm_job=None, kubernetes_pod_uid=None)
        if self.scontrol and self.squeue:
            answered, pids, states, error = self._slurm_view()
            job = slurm_job(pid, attribution.get("slurm_job"), answered, pids, states, error[0])
            if job:
                return job
        pod = attribution.get("kubernetes_pod_uid")
        if pod and self.crictl:
            if pod not in self._pods:
                rc, out, dummy = CommandRunner(self.module).probe(pod_argv(self.crictl, pod))
                self._pods[pod] = (rc, out)
            return pod_live(pod, *self._pods[pod])
        claimed = attribution.get("container")
        if claimed:
            return container_job(claimed, self.witness.inspect(claimed["runtime"], claimed["id"])[0],
                                 self.witness.confirm(pid, claimed))
        return None
