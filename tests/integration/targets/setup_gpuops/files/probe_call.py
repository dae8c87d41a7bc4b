# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test scaffolding: does this machine allow the call a test case sets itself up with? A container's seccomp profile
refuses unshare(); a read-only /sys/fs/cgroup refuses cgroup writes.

    probe_call.py NEEDS CASE     NEEDS: a comma-separated list of unshare-pid, unshare-mount, unshare-files, cgroup;
                                 CASE: target/case, as the summary names it

Prints "allowed", or "not run: <call> refused (<errno>)" for the first need refused, and then appends "integration
case CASE: not run: ..." to the file $GPUOPS_NOT_RUN_CASES names (tests/integration/run.py prints it in make test's
summary).
"""
import ctypes
import errno
import os
import sys

UNSHARE_FLAGS = {"unshare-pid": 0x20000000, "unshare-mount": 0x20000, "unshare-files": 0x400}
CGROUP_ROOT = "/sys/fs/cgroup"


def unshare_refusal(flags):
    """The errno of unshare(flags) tried in a child (the namespace must not stay with us), or 0."""
    child = os.fork()
    if child == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        os._exit(ctypes.get_errno() if libc.unshare(flags) != 0 else 0)
    return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])


def cgroup_refusal():
    """The errno of a mkdir in the hierarchy systemd names units in (as place_in_cgroup.py uses it), or 0."""
    hierarchy = next((path for path in (CGROUP_ROOT, os.path.join(CGROUP_ROOT, "systemd"), os.path.join(CGROUP_ROOT, "unified"))
                      if os.path.exists(os.path.join(path, "cgroup.procs"))), CGROUP_ROOT)
    probe = os.path.join(hierarchy, "gpuops-probe-%d" % os.getpid())
    try:
        os.mkdir(probe)
    except OSError as exc:
        return exc.errno
    os.rmdir(probe)
    return 0


def refusal(need):
    """(call, errno) of a need this machine refuses, or None."""
    if need == "cgroup":
        call, code = "cgroup mkdir", cgroup_refusal()
    else:
        call, code = "unshare", unshare_refusal(UNSHARE_FLAGS[need])
    return (call, code) if code else None


def main(needs, case):
    refused = next((found for found in (refusal(need) for need in needs.split(",")) if found), None)
    if not refused:
        print("allowed")
        return
    line = "not run: %s refused (%s)" % (refused[0], errno.errorcode.get(refused[1], refused[1]))
    print(line)
    record = os.environ.get("GPUOPS_NOT_RUN_CASES")
    if record:
        with open(record, "a") as handle:
            handle.write("integration case %s: %s\n" % (case, line))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
