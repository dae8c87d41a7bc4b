# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which ladder a host walks: the one decision of a host's platform, from how Ansible reaches it."""

from __future__ import annotations

PLATFORMS = ("linux", "windows")
WINDOWS_CONNECTIONS = ("winrm", "psrp")
WINDOWS_SHELLS = ("powershell", "cmd")


def host_platform(given="", connection="", shell_type="", os_family=""):
    """`given` when set (gpu_remediate_os); else windows for a host reached over WinRM or PSRP, through a PowerShell or
    cmd shell (ssh to Windows), or whose facts say Windows; linux otherwise. ValueError for an unknown `given`."""
    if given:
        if given not in PLATFORMS:
            raise ValueError("gpu_remediate_os: %r is none of %s" % (given, ", ".join(PLATFORMS)))
        return given
    windows = connection in WINDOWS_CONNECTIONS or shell_type in WINDOWS_SHELLS or os_family == "Windows"
    return "windows" if windows else "linux"
