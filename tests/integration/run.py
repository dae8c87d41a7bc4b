"""Run every integration target through ansible-playbook against localhost (simulated GPU nodes).

Targets keep the ansible-test layout (tests/integration/targets/<name>/tasks/main.yml); a target whose aliases file
says 'disabled' or 'device' is not run here. A target whose aliases say 'docker' or 'slurm' needs that engine (or,
'prometheus', Debian's Prometheus stack, installed when missing): before its first such target the runner starts it
for real (tools/docker_env.sh start, which uses an engine that answers or installs and starts one; tools/slurm_env.sh
start and stop on a cluster of its own). Where it cannot start (no root, dockerd unable to create its iptables chains
in an unprivileged container, slurmd unable to run), the target is reported "not run: <the tool's reason>" in the
final summary and does not fail the run; where it starts, the target runs. A dockerd the runner started is stopped at
the end. Pass target names to run only those. GPUOPS_TARGET_PYTHON=PATH runs the modules with that interpreter
(tests/inventory). With GPUOPS_INTEGRATION_JOBS=N, up to N lanes run at once (their output
kept, and printed for a target that fails): the targets that share the machine's Docker engine form one lane, those
that share its Slurm cluster another, the alert loop's a third, run one after the other within it; every other target
is a lane of its own. The shared lanes start first: they are the longest, and they spend much of their time waiting on
their daemons.
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


# How long an engine may take to start (an install with apt-get and an image built with debootstrap included).
ENGINE_START_TIMEOUT = 900


def _last_words(done):
    """The reason a tool gave for failing: its last non-empty line of stderr, else of stdout."""
    for text in (done.stderr, done.stdout):
        lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
        if lines:
            return lines[-1]
    return "exited %d without saying why" % done.returncode


def _tool(argv, timeout=ENGINE_START_TIMEOUT):
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", "%s did not finish in %d s" % (" ".join(argv), timeout))
    except OSError as exc:
        return subprocess.CompletedProcess(argv, 127, "", "cannot run %s: %s" % (argv[0], exc))


class Engines:
    """The shared engines that targets need (SHARED_RESOURCES), started for real before their first target, so that a
    target whose engine cannot start on this machine is reported not run with the reason, and one that can start runs.
    What this runner started, it stops at the end (stop())."""

    def __init__(self, tools_dir=None):
        self.tools_dir = tools_dir or os.path.join(ROOT, "tools")
        self.verdicts = {}
        self.to_stop = []

    def why_not(self, resource):
        """Why the engine cannot run here (the tool's own words), or None once it runs; tried once per run."""
        if resource not in self.verdicts:
            self.verdicts[resource] = getattr(self, "_start_" + resource)()
        return self.verdicts[resource]

    def _start_docker(self):
        # Started and left running: the target's own `docker_env.sh start` finds it and the image, and stop() ends it.
        done = _tool(["bash", os.path.join(self.tools_dir, "docker_env.sh"), "start"])
        if done.returncode != 0:
            return "the Docker engine cannot start here: %s" % _last_words(done)
        if "dockerd: started" in done.stdout:
            self.to_stop.append(["bash", os.path.join(self.tools_dir, "docker_env.sh"), "stop"])
        return None

    def _start_slurm(self):
        script = os.path.join(self.tools_dir, "slurm_env.sh")
        check = _tool(["bash", script, "check"], timeout=60)
        if check.returncode != 0:
            return _last_words(check)
        # A cluster of its own, started and stopped at once: the target starts its own, under its own directory.
        directory = tempfile.mkdtemp(prefix="gs", dir="/tmp")  # short: Slurm's socket paths are limited to 107 bytes
        try:
            done = _tool(["bash", script, "start", directory, "gpuops-probe"])
            _tool(["bash", script, "stop", directory], timeout=120)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        return None if done.returncode == 0 else "Slurm cannot start here: %s" % _last_words(done)

    def _start_prometheus(self):
        # Nothing left running: the target starts its daemons itself, on ports of its own; only the packages are needed.
        done = _tool(["bash", os.path.join(self.tools_dir, "debian_tools.sh"), "ensure", *PROMETHEUS_STACK])
        return None if done.returncode == 0 else "the Prometheus stack cannot be installed here: %s" % _last_words(done)

    def stop(self):
        for argv in self.to_stop:
            _tool(argv, timeout=120)
        self.to_stop = []


def why_not_here(name, engines):
    """Why this machine cannot run the target, or None: the engine it needs (aliases) could not be started."""
    for resource in SHARED_RESOURCES:
        if resource in aliases(name):
            reason = engines.why_not(resource)
            if reason:
                return reason
    return None


# How long one target may run: the longest (the Slurm ladder) takes about 5 minutes; GPUOPS_TARGET_DEADLINE overrides.
TARGET_DEADLINE = int(os.environ.get("GPUOPS_TARGET_DEADLINE", "1800"))


def _descendants(root_pid):
    """Every live process under root_pid, read from /proc (ansible-playbook's workers run in sessions of their own, so
    its process group is not enough)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, ()):
            found.append(child)
            todo.append(child)
    return found


def _call_with_deadline(argv, deadline, **kwargs):
    """subprocess.call that ends the whole tree and returns 124 once deadline seconds have passed."""
    proc = subprocess.Popen(argv, **kwargs)
    try:
        return proc.wait(timeout=deadline)
    except subprocess.TimeoutExpired:
        for pid in [proc.pid] + _descendants(proc.pid):
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        proc.wait(timeout=60)
        return 124


def run_target(name, env, log_dir=None, deadline=None):
    """(name, rc, seconds): the target through ansible-playbook; its output to the console, or to a file in log_dir.
    A target still running at its deadline is ended with everything it started, and fails with rc 124."""
    deadline = deadline or TARGET_DEADLINE
    started = time.monotonic()
    playbook = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), os.path.join(HERE, "run_target.yml")]
    argv = playbook + ["-e", "target=%s" % name]
    if log_dir is None:
        rc = _call_with_deadline(argv, deadline, cwd=ROOT, env=env)
    else:
        with open(os.path.join(log_dir, name + ".log"), "w") as log:
            rc = _call_with_deadline(argv, deadline, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            if rc == 124:
                log.write("\nintegration target %s: ran past its %d s deadline (GPUOPS_TARGET_DEADLINE)\n" % (name, deadline))
    if rc == 124 and log_dir is None:
        print("integration target %s: ran past its %d s deadline (GPUOPS_TARGET_DEADLINE)" % (name, deadline))
    return name, rc, time.monotonic() - started


# The resources a target takes for itself: targets naming the same one never run at the same time.
SHARED_RESOURCES = ("slurm", "docker", "prometheus")
# Debian's Prometheus stack and the Java of ansible-rulebook, for the alert loop (command:package).
PROMETHEUS_STACK = ("prometheus:prometheus", "prometheus-alertmanager:prometheus-alertmanager",
                    "prometheus-node-exporter:prometheus-node-exporter", "java:openjdk-17-jre-headless|openjdk-21-jre-headless")


def lanes_of(names):
    """The targets grouped into lanes that may run side by side: one lane per shared resource, in resource order,
    then one lane per other target."""
    lanes = [[name for name in names if resource in aliases(name)] for resource in SHARED_RESOURCES]
    claimed = set(name for lane in lanes for name in lane)
    return [lane for lane in lanes if lane] + [[name] for name in names if name not in claimed]


def run_lane(lane, env, log_dir):
    return [run_target(name, env, log_dir) for name in lane]


def main(selected, jobs=1, engines=None):
    names = selected or sorted(name for name in os.listdir(TARGETS) if runnable(name))
    if not names:
        sys.exit("no integration targets found in %s" % TARGETS)
    # Cases that could not set themselves up here (a refused unshare or cgroup write) write why into this file.
    cases_not_run = tempfile.NamedTemporaryFile(prefix="gpuops-not-run-cases-", delete=False)  # pylint: disable=consider-using-with
    cases_not_run.close()
    env = dict(os.environ, ANSIBLE_ROLES_PATH=TARGETS, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               GPUOPS_NOT_RUN_CASES=cases_not_run.name)
    engines = engines or Engines()
    failed, not_run, runnable_here = [], [], []
    for name in names:
        reason = why_not_here(name, engines)
        if reason:
            not_run.append((name, reason))
            print("integration target %s: not run: %s" % (name, reason))
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

    try:
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
    finally:
        engines.stop()
    # The summary, last: every target and case that did not run says why.
    for name, reason in not_run:
        print("integration target %s: not run: %s" % (name, reason))
    with open(cases_not_run.name) as handle:
        for line in sorted(set(handle)):
            print(line.rstrip("\n"))
    os.unlink(cases_not_run.name)
    if failed:
        sys.exit("failed integration targets: %s" % ", ".join(failed))


if __name__ == "__main__":
    arguments = sys.argv[1:]
    parallel = int(os.environ.get("GPUOPS_INTEGRATION_JOBS", "1"))
    main(arguments, jobs=parallel)
