# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tests/integration/run.py on a machine where an engine cannot start (a fresh, unprivileged container): the target
that needs it is reported "not run: <reason>" in the final summary, and the run passes; where it starts, it runs.

The real tools/docker_env.sh and tools/slurm_env.sh are run on a PATH that holds what such a machine has (no docker,
no apt-get; or a dockerd that exits because it cannot create its iptables chains). No engine is started for real.
"""

import importlib.util
import os
import shutil
import stat
import subprocess
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# What the tools need from a bare machine, without docker, dockerd, apt-get or Slurm.
HOST_PATH = os.environ.get("PATH", os.defpath)
BASE_TOOLS = ("bash", "mkdir", "id", "cat", "dirname", "tail", "sleep", "setsid", "seq", "rm", "tee")


def load_runner():
    spec = importlib.util.spec_from_file_location("gpuops_integration_run", os.path.join(ROOT, "tests", "integration", "run.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def executable(path, text):
    with open(path, "w") as handle:
        handle.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def bare_path(tmp_path, monkeypatch):
    """A PATH with only BASE_TOOLS (and what a test adds to it): no container engine, no package manager."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in BASE_TOOLS:
        found = shutil.which(tool)
        assert found, "%s is missing on this machine" % tool
        os.symlink(found, str(bin_dir / tool))
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("GPUOPS_DOCKER_STATE", str(tmp_path / "docker-state"))
    return bin_dir


@pytest.fixture
def targets(tmp_path, monkeypatch):
    """A targets directory with one target that needs Docker, one Slurm and one the Prometheus stack (none is ever run here)."""
    runner = load_runner()
    directory = tmp_path / "targets"
    for name, alias in (("needs_docker", "docker"), ("needs_slurm", "slurm"), ("needs_prometheus", "prometheus")):
        (directory / name / "tasks").mkdir(parents=True)
        (directory / name / "tasks" / "main.yml").write_text("---\n- name: never run here\n  ansible.builtin.fail:\n")
        (directory / name / "aliases").write_text("%s\nneeds/root\n" % alias)
    monkeypatch.setattr(runner, "TARGETS", str(directory))
    return runner


def test_without_docker_or_apt_get_the_docker_target_is_not_run_with_the_reason(bare_path, targets, capsys):
    engines = targets.Engines()
    reason = targets.why_not_here("needs_docker", engines)
    assert reason == "the Docker engine cannot start here: docker_env: no Docker engine answers and there is no apt-get to install one"
    targets.main(["needs_docker"], engines=engines)  # no SystemExit: a target not run is no failure
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == "integration target needs_docker: not run: %s" % reason


def test_a_dockerd_that_cannot_create_its_iptables_chains_is_not_run_with_its_words_and_nothing_is_left_running(bare_path, targets, capsys):
    """docker.io is installed but the container has no privileges: dockerd exits at once, as in a dev container."""
    executable(str(bare_path / "docker"), "#!/bin/bash\nexit 1\n")  # `docker info`: no engine answers
    executable(str(bare_path / "debootstrap"), "#!/bin/bash\nexit 1\n")
    executable(str(bare_path / "pgrep"), "#!/bin/bash\nexit 1\n")  # no other dockerd on this machine
    executable(str(bare_path / "dockerd"), "#!/bin/bash\necho 'failed to start daemon: Error initializing network controller: "
               "error obtaining controller instance: failed to create NAT chain DOCKER: iptables failed: iptables --wait -t nat "
               "-N DOCKER: iptables v1.8.9 (nf_tables): Could not fetch rule set generation id: Permission denied (you must be root)'\n"
               "exit 1\n")
    engines = targets.Engines()
    reason = targets.why_not_here("needs_docker", engines)
    assert reason.startswith("the Docker engine cannot start here: docker_env: dockerd exit")
    assert engines.to_stop == []
    targets.main(["needs_docker"], engines=engines)
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1].startswith("integration target needs_docker: not run: the Docker engine cannot start here")
    assert "FAILED" not in out


def test_without_slurm_or_apt_get_the_slurm_target_is_not_run_with_the_reason(bare_path, targets, capsys):
    engines = targets.Engines()
    assert targets.why_not_here("needs_slurm", engines) == \
        "needs Debian's slurmctld, slurmd, slurm-client and munge, or root with apt-get to install them"
    targets.main(["needs_slurm", "needs_docker"], engines=engines)
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(":")[0] for line in lines[-2:]] == ["integration target needs_slurm", "integration target needs_docker"]
    assert all(": not run: " in line for line in lines[-2:])


def test_without_the_prometheus_stack_or_apt_get_the_alert_loop_is_not_run_with_the_reason(bare_path, targets, capsys):
    """The alert loop's target (aliases: prometheus) needs Debian's prometheus, alertmanager, node_exporter and Java:
    missing and not installable, it is not run, naming them; it runs in a lane of its own."""
    engines = targets.Engines()
    assert targets.why_not_here("needs_prometheus", engines) == (
        "the Prometheus stack cannot be installed here: debian_tools: needs Debian's prometheus prometheus-alertmanager "
        "prometheus-node-exporter openjdk-17-jre-headless or openjdk-21-jre-headless, or root with apt-get to install them")
    targets.main(["needs_prometheus"], engines=engines)
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("integration target needs_prometheus: not run: ")
    assert targets.lanes_of(["needs_prometheus", "needs_docker", "other"]) == [["needs_docker"], ["needs_prometheus"], ["other"]]


def test_a_slurmd_that_cannot_run_is_not_run_with_its_words(tmp_path, targets):
    tools = tmp_path / "tools"
    tools.mkdir()
    calls = tmp_path / "calls"
    executable(str(tools / "slurm_env.sh"), "#!/bin/bash\necho \"$1\" >> %s\ncase $1 in check) exit 0 ;; stop) exit 0 ;; esac\n"
               "echo 'slurm_env: slurmd did not start; last lines of its log: error: cannot create cgroup: Read-only file system' >&2\n"
               "exit 1\n" % calls)
    engines = targets.Engines(str(tools))
    assert targets.why_not_here("needs_slurm", engines) == \
        "Slurm cannot start here: slurm_env: slurmd did not start; last lines of its log: error: cannot create cgroup: Read-only file system"
    # It was tried once, and what the try started was stopped.
    assert targets.why_not_here("needs_slurm", engines) is not None
    assert calls.read_text().split() == ["check", "start", "stop"]


def test_an_engine_that_starts_runs_its_target_and_the_runner_stops_what_it_started(tmp_path, targets):
    tools = tmp_path / "tools"
    tools.mkdir()
    calls = tmp_path / "calls"
    executable(str(tools / "docker_env.sh"), "#!/bin/bash\necho \"$1\" >> %s\n[[ $1 == start ]] && echo 'dockerd: started (pid 4242)'\n"
               "exit 0\n" % calls)
    engines = targets.Engines(str(tools))
    assert targets.why_not_here("needs_docker", engines) is None
    engines.stop()
    assert calls.read_text().split() == ["start", "stop"]


def test_an_engine_already_running_is_used_and_left_running(tmp_path, targets):
    tools = tmp_path / "tools"
    tools.mkdir()
    calls = tmp_path / "calls"
    executable(str(tools / "docker_env.sh"), "#!/bin/bash\necho \"$1\" >> %s\necho 'dockerd: already running'\n" % calls)
    engines = targets.Engines(str(tools))
    assert targets.why_not_here("needs_docker", engines) is None
    engines.stop()
    assert calls.read_text().split() == ["start"]


def test_a_target_past_its_deadline_is_ended_with_what_it_started_and_fails(tmp_path, monkeypatch, targets):
    # A stand-in for ansible-playbook that starts a child in a session of its own (as ansible's workers do) and
    # never ends; the child writes its pid so the test can see it gone afterwards.
    pid_file = tmp_path / "worker.pid"
    fake_bin = tmp_path / "fakebin"
    fake_bin.mkdir()
    executable(str(fake_bin / "ansible-playbook"),
               "#!/bin/bash\nsetsid bash -c 'echo $$ > %s; exec sleep 600' &\n"
               "until [[ -s %s ]]; do sleep 0.01; done\nexec sleep 600\n" % (pid_file, pid_file))
    monkeypatch.setattr(targets.sys, "executable", str(fake_bin / "python"))
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    name, rc, _seconds = targets.run_target("needs_docker", dict(os.environ), str(log_dir), deadline=5)
    assert (name, rc) == ("needs_docker", 124)
    assert "ran past its 5 s deadline (GPUOPS_TARGET_DEADLINE)" in (log_dir / "needs_docker.log").read_text()
    worker = int(pid_file.read_text())
    # SIGKILL was sent; a loaded machine may take a moment to schedule the worker's death.
    give_up = time.monotonic() + 60
    state = _state(worker)
    while state not in (None, "Z") and time.monotonic() < give_up:
        time.sleep(0.05)
        state = _state(worker)
    assert state in (None, "Z"), "the target's worker %d still runs 60 s after its kill (state %s)" % (worker, state)


def _state(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def as_root_with_flock(bare_path):
    """The tool installs only as root: `id -u` says 0 here, whoever runs the tests."""
    os.unlink(str(bare_path / "id"))
    executable(str(bare_path / "id"), "#!/bin/bash\necho 0\n")
    os.symlink(shutil.which("flock", path=HOST_PATH), str(bare_path / "flock"))


@pytest.mark.parametrize("known, installed", [("openjdk-17-jre-headless", "openjdk-17-jre-headless"),
                                              ("openjdk-21-jre-headless", "openjdk-21-jre-headless"),
                                              ("openjdk-17-jre-headless openjdk-21-jre-headless", "openjdk-17-jre-headless")])
def test_ensure_installs_the_first_alternative_apt_has(bare_path, tmp_path, known, installed):
    """java:openjdk-17-jre-headless|openjdk-21-jre-headless: the first package apt can install is installed (Debian 12 has
    17, Debian 13 only 21), decided by the exit code of apt-get's simulated install, never by the release's name."""
    log = tmp_path / "apt.log"
    as_root_with_flock(bare_path)
    # apt-get: a simulated install succeeds only for the packages this release has; a real one is logged and gives java.
    executable(str(bare_path / "apt-get"), "#!/bin/bash\nif [[ $2 == --simulate ]]; then [[ ' %s ' == *\" ${@: -1} \"* ]]; exit; fi\n"
               "echo \"$*\" >>%s\n[[ $1 == install ]] && printf '#!/bin/bash\\n' >%s/java && chmod +x %s/java\nexit 0\n"
               % (known, log, bare_path, bare_path))
    os.symlink(shutil.which("chmod", path=HOST_PATH), str(bare_path / "chmod"))
    done = subprocess.run(["bash", os.path.join(ROOT, "tools", "debian_tools.sh"), "ensure", "java:openjdk-17-jre-headless|openjdk-21-jre-headless"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout
    assert log.read_text().splitlines() == ["install -y -q --no-install-recommends %s" % installed]


def test_ensure_names_the_alternatives_when_apt_has_none_even_after_fetching_the_lists(bare_path, tmp_path):
    log = tmp_path / "apt.log"
    as_root_with_flock(bare_path)
    executable(str(bare_path / "apt-get"), "#!/bin/bash\n[[ $2 == --simulate ]] && exit 100\necho \"$*\" >>%s\n" % log)
    done = subprocess.run(["bash", os.path.join(ROOT, "tools", "debian_tools.sh"), "ensure", "java:openjdk-17-jre-headless|openjdk-21-jre-headless"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=60, check=False)
    assert done.returncode == 3
    assert "apt has none of openjdk-17-jre-headless, openjdk-21-jre-headless" in done.stdout
    assert log.read_text().splitlines() == ["update -q"]
