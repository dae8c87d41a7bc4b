"""Run every integration target through ansible-playbook against localhost (simulated GPU nodes).

Targets keep the ansible-test layout (tests/integration/targets/<name>/tasks/main.yml); a target whose
aliases file says 'disabled' or 'device' is not run here. A target whose aliases say 'docker' needs a Docker
engine, which tools/docker_env.sh provides when one runs or when it can install one (root and apt-get); on a
machine where neither holds, it is reported as not run, with the reason, in the summary. Pass target names to
run only those.
"""
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TARGETS = os.path.join(HERE, "targets")
ROOT = os.path.dirname(os.path.dirname(HERE))


def aliases(name):
    path = os.path.join(TARGETS, name, "aliases")
    with open(path) if os.path.exists(path) else open(os.devnull) as handle:
        return set(handle.read().split())


def runnable(name):
    return os.path.exists(os.path.join(TARGETS, name, "tasks", "main.yml")) and not {"disabled", "device"} & aliases(name)


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


def main(selected):
    names = selected or sorted(name for name in os.listdir(TARGETS) if runnable(name))
    if not names:
        sys.exit("no integration targets found in %s" % TARGETS)
    env = dict(os.environ, ANSIBLE_ROLES_PATH=TARGETS, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    failed, not_run = [], []
    for name in names:
        reason = why_not_here(name)
        if reason:
            not_run.append("%s (%s)" % (name, reason))
            print("integration target %s: NOT RUN, %s" % (name, reason))
            continue
        started = time.monotonic()
        playbook = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), os.path.join(HERE, "run_target.yml")]
        rc = subprocess.call(playbook + ["-e", "target=%s" % name], cwd=ROOT, env=env)
        print("integration target %s: %s (%.1f s)" % (name, "ok" if rc == 0 else "FAILED rc=%d" % rc, time.monotonic() - started))
        if rc:
            failed.append(name)
    if not_run:
        print("integration targets not run on this machine: %s" % "; ".join(not_run))
    if failed:
        sys.exit("failed integration targets: %s" % ", ".join(failed))


if __name__ == "__main__":
    main(sys.argv[1:])
