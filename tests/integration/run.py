"""Run every integration target through ansible-playbook against localhost (simulated GPU nodes).

Targets keep the ansible-test layout (tests/integration/targets/<name>/tasks/main.yml); a target whose
aliases file says 'disabled' or 'device' is not run here. Pass target names to run only those.
"""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TARGETS = os.path.join(HERE, "targets")
ROOT = os.path.dirname(os.path.dirname(HERE))


def runnable(name):
    aliases = os.path.join(TARGETS, name, "aliases")
    words = open(aliases).read().split() if os.path.exists(aliases) else []
    return os.path.exists(os.path.join(TARGETS, name, "tasks", "main.yml")) and not {"disabled", "device"} & set(words)


def main(selected):
    names = selected or sorted(name for name in os.listdir(TARGETS) if runnable(name))
    if not names:
        sys.exit("no integration targets found in %s" % TARGETS)
    env = dict(os.environ, ANSIBLE_ROLES_PATH=TARGETS, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    failed = []
    for name in names:
        started = time.monotonic()
        playbook = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), os.path.join(HERE, "run_target.yml")]
        rc = subprocess.call(playbook + ["-e", "target=%s" % name], cwd=ROOT, env=env)
        print("integration target %s: %s (%.1f s)" % (name, "ok" if rc == 0 else "FAILED rc=%d" % rc, time.monotonic() - started))
        if rc:
            failed.append(name)
    if failed:
        sys.exit("failed integration targets: %s" % ", ".join(failed))


if __name__ == "__main__":
    main(sys.argv[1:])
