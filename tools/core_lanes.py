# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The other ansible-core versions this collection supports (meta/runtime.yml), and the GPU nodes' own Pythons.

The node lane: one run of tests/lanes/node_pythons.yml whose inventory has a simulated stuck node for each node Python
found under pyenv (`pyenv root`), each with that Python as its ansible_python_interpreter (in a venv of its own with
nvidia-ml-py, as the gpu_node_prep role makes one on a node): every Linux module once, then the whole ladder, on all
of them at once. Each core lane is a venv of its own under ~/.cache/gpuops-remediation/lanes/ (GPUOPS_LANES_DIR;
made once, kept while its Python and requirements stay the same), on the first controller Python that version installs
on: the running one, else pyenv's. It runs the unit tests that hold what differs between versions, the input check with
AWX's answers, and the node lane's playbook on the controller's own Python. A lane that cannot find or install what it
needs says `not run: <reason>`; the summary says which ansible-core versions and target Pythons ran."""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Outside the checkout, as pip's cache is: a clean clone on the same machine finds the venvs made for an earlier one.
LANES = os.environ.get("GPUOPS_LANES_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                                                           "gpuops-remediation", "lanes")
# Each version's pin, and the controller Pythons it installs on (ansible-core's own python_requires).
CORES = (("2.16.19", ("3.12", "3.11", "3.10")), ("2.18.19", ("3.13", "3.12", "3.11")))
PYTEST = "pytest==9.2.0"
# The GPU nodes' interpreters: Ubuntu 20.04, RHEL 9, Ubuntu 22.04, Ubuntu 24.04, and the newest.
NODE_PYTHONS = ("3.8", "3.9", "3.10", "3.12", "3.13")
# The unit tests that hold what differs between versions: the action plugins' API, the input check with AWX's answers,
# the walk, the report.
UNITS = ("tests/unit/plugins/plugin_utils/test_inputs.py", "tests/unit/plugins/plugin_utils/test_ladder.py",
         "tests/unit/plugins/plugin_utils/test_run_report.py", "tests/unit/plugins/plugin_utils/test_core_versions.py")
# AWX's answers through the input check (the node lane's playbook covers the modules, the ladder and the report).
TARGETS = ("gpu_input_check_awx",)
NODE_PLAYBOOK = os.path.join(ROOT, "tests", "lanes", "node_pythons.yml")
STEP_DEADLINE = 1200


def pyenv_pythons():
    """{'3.12': path} of every CPython under pyenv's versions/, found at run time."""
    try:
        root = subprocess.run(["pyenv", "root"], check=False, capture_output=True, text=True, timeout=60).stdout.strip()
    except OSError:
        return {}
    found = {}
    for name in sorted(os.listdir(os.path.join(root, "versions"))) if root and os.path.isdir(os.path.join(root, "versions")) else []:
        parts = name.split(".")
        path = os.path.join(root, "versions", name, "bin", "python%s.%s" % tuple(parts[:2])) if len(parts) >= 2 else ""
        if os.access(path, os.X_OK):
            found[".".join(parts[:2])] = path
    return found


def controller_for(accepted, pythons):
    """The Python to make a lane's venv with: the running one when ansible-core accepts it, else pyenv's."""
    here = "%d.%d" % sys.version_info[:2]
    if here in accepted:
        return sys.executable, here
    for version in accepted:
        if version in pythons:
            return pythons[version], version
    return None, None


def cached_venv(name, python, requirements):
    """The venv LANES/<name> on `python` with `requirements` (pip arguments) installed, made once and made again
    when the requirements or the files they name change; (bin dir, None) or (None, why it could not be made)."""
    venv = os.path.join(LANES, name)
    key = hashlib.sha256(json.dumps([os.path.realpath(python)] + list(requirements)).encode())
    for argument in requirements:
        if os.path.isfile(argument):
            with open(argument, "rb") as handle:
                key.update(handle.read())
    marker = os.path.join(venv, ".installed-" + key.hexdigest()[:16])
    if os.path.exists(marker):
        return os.path.join(venv, "bin"), None
    shutil.rmtree(venv, ignore_errors=True)
    steps = ([python, "-m", "venv", venv],
             [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"] + list(requirements))
    for argv in steps:
        try:
            done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=STEP_DEADLINE)
        except OSError as exc:
            return None, "cannot run %s: %s" % (argv[0], exc.strerror)
        if done.returncode:
            lines = (done.stderr or done.stdout).strip().splitlines()
            return None, "%s failed: %s" % (" ".join(argv[1:4]), lines[-1] if lines else done.returncode)
    with open(marker, "w"):
        pass
    return os.path.join(venv, "bin"), None


def run(argv, env=None):
    started = time.monotonic()
    rc = subprocess.run(argv, check=False, cwd=ROOT, env=env, timeout=STEP_DEADLINE * 2).returncode
    return rc, time.monotonic() - started


def node_pythons_playbook(bindir, nodes, env=None):
    """tests/lanes/node_pythons.yml with ansible-playbook of bindir, one simulated node per (version, python) of nodes;
    (rc, seconds). The nodes live in a scratch directory removed at the end, which also ends their processes."""
    lane_dir = tempfile.mkdtemp(prefix="gpuops-node-lane-")
    try:
        hosts = dict(("node-py%s" % version, {
            "ansible_connection": "local", "ansible_python_interpreter": python, "node_python_version": version,
            "gpuops_environment": {"GPUOPS_SIM_ROOT": os.path.join(lane_dir, "node-py%s" % version)}}) for version, python in nodes)
        inventory = os.path.join(lane_dir, "inventory.json")
        with open(inventory, "w") as handle:
            json.dump({"all": {"children": {"gpu_nodes": {"hosts": hosts}}}}, handle)
        env = dict(env or os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_FORKS=str(max(len(nodes), 1)))
        return run([os.path.join(bindir, "ansible-playbook"), "-i", inventory, NODE_PLAYBOOK, "-e", "lane_dir=" + lane_dir], env)
    finally:
        shutil.rmtree(lane_dir, ignore_errors=True)


def core_lane(core, accepted, pythons, results):
    python, version = controller_for(accepted, pythons)
    lane = "ansible-core %s" % core
    if python is None:
        results.append((lane, "not run: no Python %s here (not this one, not under pyenv)" % "/".join(accepted)))
        return
    bindir, why = cached_venv("core%s-py%s" % (core, version), python,
                              ["ansible-core==" + core, PYTEST, "-r", os.path.join(ROOT, "tests", "unit", "requirements.txt")])
    if why:
        results.append((lane, "not run: %s" % why))
        return
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""), GPUOPS_INTEGRATION_JOBS="1")
    steps = (("units", [os.path.join(bindir, "python"), "-m", "pytest", "-p", "no:cacheprovider", "-q"] + list(UNITS)),
             ("targets", [os.path.join(bindir, "python"), "tests/integration/run.py"] + list(TARGETS)))
    outcomes = [(name,) + run(argv, env) for name, argv in steps]
    outcomes.append(("node playbook",) + node_pythons_playbook(bindir, [(version, os.path.join(bindir, "python"))], env))
    failed = [name for name, rc, _seconds in outcomes if rc]
    ran = "ran: %d unit files, target %s, tests/lanes/node_pythons.yml (%.0f s)" % (
        len(UNITS), " ".join(TARGETS), sum(seconds for _name, _rc, seconds in outcomes))
    results.append(("%s (controller Python %s)" % (lane, version), ("FAILED: " + ", ".join(failed)) if failed else ran))


def node_lane(pythons, results):
    """Every node Python found, in one run of the node playbook on the pinned ansible-core."""
    with open(os.path.join(ROOT, "requirements.txt")) as handle:
        pin = [line.strip() for line in handle if line.startswith("nvidia-ml-py")][0]
    nodes = []
    for version in NODE_PYTHONS:
        if version not in pythons:
            results.append(("target Python %s" % version, "not run: no Python %s under pyenv here" % version))
            continue
        bindir, why = cached_venv("node-py%s" % version, pythons[version], [pin])
        if why:
            results.append(("target Python %s" % version, "not run: %s" % why))
        else:
            nodes.append((version, os.path.join(bindir, "python")))
    if nodes:
        rc, seconds = node_pythons_playbook(os.path.dirname(sys.executable), nodes)
        results.append(("target Pythons %s" % " ".join(version for version, _python in nodes),
                        "FAILED: tests/lanes/node_pythons.yml" if rc else "ran: tests/lanes/node_pythons.yml (%.0f s)" % seconds))


def _pinned():
    from ansible.release import __version__  # pylint: disable=import-outside-toplevel
    return __version__


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--cores", action="store_true", help="only the ansible-core lanes")
    parser.add_argument("--nodes", action="store_true", help="only the target-Python lanes")
    parser.add_argument("--summary", help="also write the summary to this file")
    args = parser.parse_args(argv)
    both = not (args.cores or args.nodes)
    pythons = pyenv_pythons()
    results = []
    if args.nodes or both:
        node_lane(pythons, results)
    if args.cores or both:
        for core, accepted in CORES:
            core_lane(core, accepted, pythons, results)
    summary = "ansible-core versions and target Pythons:\n  ansible-core %s (pinned, controller Python %d.%d): ran every test\n" % (
        _pinned(), sys.version_info[0], sys.version_info[1]) + "".join("  %s: %s\n" % pair for pair in results)
    print(summary, end="")
    if args.summary:
        with open(args.summary, "w") as handle:
            handle.write(summary)
    return 1 if any(outcome.startswith("FAILED") for _lane, outcome in results) else 0


if __name__ == "__main__":
    sys.exit(main())
