# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The other ansible-core versions this collection supports (meta/runtime.yml), and the GPU nodes' own Pythons.

Each core lane is a venv of its own under .build/lanes/ (made once, keyed on the pinned versions and the controller's
Python), on the first controller Python that version installs on: the running one, else pyenv's (`pyenv root`). It
runs a focused set of unit tests and the core integration targets with that ansible-core. The target-Python lanes run
the Linux core targets' modules with ansible_python_interpreter set to each node Python found under pyenv (in a venv
of its own with nvidia-ml-py, as the gpu_node_prep role makes one on a node), on the pinned ansible-core. A lane that
cannot find or install what it needs says `not run: <reason>`; the summary says which ansible-core versions and target
Pythons ran."""

import argparse
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LANES = os.path.join(ROOT, ".build", "lanes")
# Each version's pin, and the controller Pythons it installs on (ansible-core's own python_requires).
CORES = (("2.16.19", ("3.12", "3.11", "3.10")), ("2.18.19", ("3.13", "3.12", "3.11")))
PYTEST = "pytest==9.2.0"
# The GPU nodes' interpreters: Ubuntu 20.04, RHEL 9, Ubuntu 22.04, Ubuntu 24.04, and the newest.
NODE_PYTHONS = ("3.8", "3.9", "3.10", "3.12", "3.13")
# The unit tests that hold what differs between versions: the action plugins' API, the input check with AWX's answers,
# the walk, the report.
UNITS = ("tests/unit/plugins/plugin_utils/test_inputs.py", "tests/unit/plugins/plugin_utils/test_ladder.py",
         "tests/unit/plugins/plugin_utils/test_run_report.py", "tests/unit/plugins/plugin_utils/test_core_versions.py")
# The ladder on a simulated node, gpu_kill, the report, and the AWX answers through the input check.
TARGETS = ("reset_gpu_playbook", "gpu_kill", "gpu_report_playbook", "gpu_input_check_awx")
NODE_TARGETS = ("gpu_holders_info",)
STEP_DEADLINE = 1200


def version_of(python):
    try:
        out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], check=False, capture_output=True,
                             text=True, timeout=60)
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


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


def lane_venv(core, python, version):
    """The venv for ansible-core `core` on `python`, made once; (bin dir, None) or (None, why it could not be made)."""
    venv = os.path.join(LANES, "core%s-py%s" % (core, version))
    marker = os.path.join(venv, ".installed-" + PYTEST)
    if os.path.exists(marker):
        return os.path.join(venv, "bin"), None
    shutil.rmtree(venv, ignore_errors=True)
    steps = ([python, "-m", "venv", venv],
             [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
              "ansible-core==" + core, PYTEST, "-r", os.path.join(ROOT, "tests", "unit", "requirements.txt")])
    for argv in steps:
        done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=STEP_DEADLINE)
        if done.returncode:
            lines = (done.stderr or done.stdout).strip().splitlines()
            return None, "%s failed: %s" % (os.path.basename(argv[0]) if argv[1] != "-m" else argv[3], lines[-1] if lines else done.returncode)
    with open(marker, "w"):
        pass
    return os.path.join(venv, "bin"), None


def run(argv, env=None):
    started = time.monotonic()
    rc = subprocess.run(argv, check=False, cwd=ROOT, env=env, timeout=STEP_DEADLINE * 2).returncode
    return rc, time.monotonic() - started


def core_lane(core, accepted, pythons, results):
    python, version = controller_for(accepted, pythons)
    if python is None:
        results.append(("ansible-core %s" % core, "not run: no Python %s here (not this one, not under pyenv)" % "/".join(accepted)))
        return
    bindir, why = lane_venv(core, python, version)
    if why:
        results.append(("ansible-core %s" % core, "not run: %s" % why))
        return
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""), GPUOPS_INTEGRATION_JOBS="2")
    rc_units, units_s = run([os.path.join(bindir, "python"), "-m", "pytest", "-p", "no:cacheprovider", "-q"] + list(UNITS), env)
    rc_targets, targets_s = run([os.path.join(bindir, "python"), "tests/integration/run.py"] + list(TARGETS), env)
    failed = [name for name, rc in (("units", rc_units), ("integration", rc_targets)) if rc]
    results.append(("ansible-core %s (controller Python %s)" % (core, version),
                    ("FAILED: " + ", ".join(failed)) if failed else "ran: %d unit files (%.0f s), targets %s (%.0f s)" % (
                        len(UNITS), units_s, " ".join(TARGETS), targets_s)))


def node_python(version, python):
    """A venv on the node Python with nvidia-ml-py, as the gpu_node_prep role makes one on a node; (python, None) or
    (None, why not)."""
    with open(os.path.join(ROOT, "requirements.txt")) as handle:
        pin = [line.strip() for line in handle if line.startswith("nvidia-ml-py")][0]
    venv = os.path.join(LANES, "node-py%s" % version)
    marker = os.path.join(venv, ".installed-" + pin)
    if not os.path.exists(marker):
        shutil.rmtree(venv, ignore_errors=True)
        for argv in ([python, "-m", "venv", venv],
                     [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", pin]):
            done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=STEP_DEADLINE)
            if done.returncode:
                lines = (done.stderr or done.stdout).strip().splitlines()
                return None, "%s failed: %s" % (" ".join(argv[1:3]), lines[-1] if lines else done.returncode)
        with open(marker, "w"):
            pass
    return os.path.join(venv, "bin", "python"), None


def node_lane(version, pythons, results):
    if version not in pythons:
        results.append(("target Python %s" % version, "not run: no Python %s under pyenv here" % version))
        return
    python, why = node_python(version, pythons[version])
    if why:
        results.append(("target Python %s" % version, "not run: %s" % why))
        return
    env = dict(os.environ, GPUOPS_TARGET_PYTHON=python, GPUOPS_INTEGRATION_JOBS="2")
    rc, seconds = run([sys.executable, "tests/integration/run.py"] + list(NODE_TARGETS), env)
    results.append(("target Python %s" % version, "FAILED" if rc else "ran: %s (%.0f s)" % (" ".join(NODE_TARGETS), seconds)))


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
    if args.cores or both:
        for core, accepted in CORES:
            core_lane(core, accepted, pythons, results)
    if args.nodes or both:
        for version in NODE_PYTHONS:
            node_lane(version, pythons, results)
    summary = "ansible-core versions and target Pythons:\n  ansible-core %s (pinned, controller Python %d.%d): ran every test\n" % (
        _pinned(), sys.version_info[0], sys.version_info[1]) + "".join("  %s: %s\n" % pair for pair in results)
    print(summary, end="")
    if args.summary:
        with open(args.summary, "w") as handle:
            handle.write(summary)
    return 1 if any(outcome.startswith("FAILED") for _lane, outcome in results) else 0


if __name__ == "__main__":
    sys.exit(main())
