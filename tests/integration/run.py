"""Run every integration target through ansible-playbook against localhost (simulated GPU nodes).

Targets keep the ansible-test layout (tests/integration/targets/<name>/tasks/main.yml); a target whose
aliases file says 'disabled' or 'device' is not run here. A target whose aliases say 'docker' needs a Docker
engine, which tools/docker_env.sh provides when one runs or when it can install one (root and apt-get); on a
machine where neither holds, it is reported as not run, with the reason, in the summary. Pass target names to
run only those. With GPUOPS_INTEGRATION_JOBS=N, up to N lanes run at once (their output kept, and printed for a
target that fails): the targets that share the machine's Docker engine form one lane, those that share its Slurm
cluster another, run one after the other within it; every other target is a lane of its own. The shared lanes start
first: they are the longest, and they spend much of their time waiting on their daemons.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
TARGETS = os.path.join(HERE, "targets")
ROOT = os.path.dirname(os.path.dirname(HERE))


def aliases(name):
    path = os.path.join(TARGETS, name, "aliases")
    with open(path) if os.path.exists(path) else open(os.devnull) as handle:
        return set(handle.read().split())


def runnable(name):
    return os.path.exists(os.path.join(TARGETS, name, "tasks", "main.yml")) and not {"disabled", "device", "hidden"} & aliases(name)


def why_not_here(name):
    """Why this machine cannot run the target, or None."""
    if "slurm" in aliases(name):
        check = subprocess.run(["bash", os.path.join(ROOT, "tools", "slurm_env.sh"), "check"], capture_output=True, text=True, check=False)
        return None if check.returncode == 0 else check.stdout.strip() or check.stderr.strip()
    if "docker" not in aliases(name):
        return None
    if shutil.which("docker") and subprocess.call(["docker", "info"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
        return None
    if os.geteuid() == 0 and shutil.which("apt-get"):
        return None  # tools/docker_env.sh installs and starts one
    return "needs a running Docker engine, or root with apt-get to install one"


def run_target(name, env, log_dir=None):
    """(name, rc, seconds): the target through ansible-playbook; its output to the console, or to a file in log_dir."""
    started = time.monotonic()
    playbook = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), os.path.join(HERE, "run_target.yml")]
    argv = playbook + ["-e", "target=%s" % name]
    if log_dir is None:
        rc = subprocess.call(argv, cwd=ROOT, env=env)
    else:
        with open(os.path.join(log_dir, name + ".log"), "w") as log:
            rc = subprocess.call(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    return name, rc, time.monotonic() - started


# The resources a target takes for itself: targets naming the same one never run at the same time.
SHARED_RESOURCES = ("slurm", "docker")


def lanes_of(names):
    """The targets grouped into lanes that may run side by side: one lane per shared resource, in resource order,
    then one lane per other target."""
    lanes = [[name for name in names if resource in aliases(name)] for resource in SHARED_RESOURCES]
    claimed = set(name for lane in lanes for name in lane)
    return [lane for lane in lanes if lane] + [[name] for name in names if name not in claimed]


def run_lane(lane, env, log_dir):
    return [run_target(name, env, log_dir) for name in lane]


def main(selected, jobs=1):
    names = selected or sorted(name for name in os.listdir(TARGETS) if runnable(name))
    if not names:
        sys.exit("no integration targets found in %s" % TARGETS)
    env = dict(os.environ, ANSIBLE_ROLES_PATH=TARGETS, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    failed, not_run, runnable_here = [], [], []
    for name in names:
        reason = why_not_here(name)
        if reason:
            not_run.append("%s (%s)" % (name, reason))
            print("integration target %s: NOT RUN, %s" % (name, reason))
        else:
            runnable_here.append(name)

    def report(name, rc, seconds, log_dir=None):
        if rc and log_dir:
            with open(os.path.join(log_dir, name + ".log")) as log:
                sys.stdout.write(log.read())
        print("integration target %s: %s (%.1f s)" % (name, "ok" if rc == 0 else "FAILED rc=%d" % rc, seconds))
        sys.stdout.flush()
        if rc:
            failed.append(name)

    if jobs > 1:
        # Each target builds its own simulated nodes under its own directory: lanes can run side by side.
        log_dir = tempfile.mkdtemp(prefix="gpuops-integration-")
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for results in pool.map(lambda lane: run_lane(lane, env, log_dir), lanes_of(runnable_here)):
                for name, rc, seconds in results:
                    report(name, rc, seconds, log_dir)
        shutil.rmtree(log_dir, ignore_errors=True)
    else:
        for name in runnable_here:
            report(*run_target(name, env))
    if not_run:
        print("integration targets not run on this machine: %s" % "; ".join(not_run))
    if failed:
        sys.exit("failed integration targets: %s" % ", ".join(failed))


if __name__ == "__main__":
    arguments = sys.argv[1:]
    parallel = int(os.environ.get("GPUOPS_INTEGRATION_JOBS", "1"))
    main(arguments, jobs=parallel)
