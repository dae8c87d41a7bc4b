# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The PowerShell scripts the Windows action plugins run through ansible.windows.win_powershell, by name.

No value is ever put into a script's text: what a script needs comes in as win_powershell `parameters` (data,
bound to the param block). Each script sets $Ansible.Result to ConvertTo-Json text of the CIM objects (property
names are never translated; the parsers in _win_processes/_win_counters read that text, as the captures show it),
sets $Ansible.Changed to $false (they only read), and declares SupportsShouldProcess so that it runs in check mode.
The simulated node (_win_sim) answers the same names.
"""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.plugin_utils._win_counters import CIM_CLASS
from ansible_collections.gpuops.remediation.plugins.plugin_utils._win_powershell import literal

# One round trip for everything the snapshot reads through PowerShell: the GPU Process Memory counters (the
# language-neutral CIM class, else the English counter paths, which only an English Windows has), the processes
# with their owners, the DirectX adapters' LUIDs from the registry, and whether the Store WSL is installed.
# Win32_Process with each process's owner; sets $processes.
_PROCESSES = r"""# Get-Process -IncludeUserName needs an elevated session; without it the owners stay unknown (null).
$owners = @{}
try {
    Get-Process -IncludeUserName | ForEach-Object { $owners[[int]$_.Id] = $_.UserName }
}
catch {
    $owners = @{}
}
$processes = Get-CimInstance -ClassName Win32_Process | ForEach-Object {
    [pscustomobject]@{
        ProcessId = $_.ProcessId
        ParentProcessId = $_.ParentProcessId
        Name = $_.Name
        ExecutablePath = $_.ExecutablePath
        CreationDate = $_.CreationDate
        SessionId = $_.SessionId
        User = $owners[[int]$_.ProcessId]
    }
}
"""

SNAPSHOT = r"""[CmdletBinding(SupportsShouldProcess)]
param (
    [Parameter(Mandatory)]
    [string]$WslPath
)
$ErrorActionPreference = 'Stop'
$Ansible.Changed = $false

function ConvertTo-JsonText($items) {
    ConvertTo-Json -InputObject @($items) -Depth 3
}

$memory = @{ source = 'cim'; json = ''; error = $null }
try {
    $rows = Get-CimInstance -ClassName %(cim_class)s |
        Select-Object -Property Name, DedicatedUsage, SharedUsage, LocalUsage, NonLocalUsage, TotalCommitted
    $memory.json = ConvertTo-JsonText $rows
}
catch {
    $memory.error = $_.Exception.Message
    try {
        $paths = '\GPU Process Memory(*)\Dedicated Usage', '\GPU Process Memory(*)\Shared Usage'
        $samples = (Get-Counter -Counter $paths).CounterSamples | Select-Object -Property Path, CookedValue
        $memory.source = 'counter'
        $memory.json = ConvertTo-JsonText $samples
    }
    catch {
        $memory.source = $null
        $memory.error = '{0} / {1}' -f $memory.error, $_.Exception.Message
    }
}

%(processes)s
$adapters = Get-ChildItem -LiteralPath 'HKLM:\SOFTWARE\Microsoft\DirectX' -ErrorAction SilentlyContinue | ForEach-Object {
    $values = Get-ItemProperty -LiteralPath $_.PSPath
    if ($null -ne $values.AdapterLuid) {
        [pscustomobject]@{
            Key = $_.PSChildName
            Description = $values.Description
            AdapterLuid = [string]$values.AdapterLuid
            VendorId = $values.VendorId
            DeviceId = $values.DeviceId
        }
    }
}

$Ansible.Result = @{
    process_memory = $memory
    processes = ConvertTo-JsonText $processes
    adapters = ConvertTo-JsonText $adapters
    store_wsl = Test-Path -LiteralPath $WslPath -PathType Leaf
}
""" % {"cim_class": literal(CIM_CLASS), "processes": _PROCESSES}

# Whether a file exists (the Store WSL's wsl.exe), the path given as data.
WSL_PATH = r"""[CmdletBinding(SupportsShouldProcess)]
param (
    [Parameter(Mandatory)]
    [string]$Path
)
$Ansible.Changed = $false
$Ansible.Result = @{ exists = Test-Path -LiteralPath $Path -PathType Leaf }
"""

# A fresh process list alone (pid + creation time: what win_gpu_reset checks before each taskkill).
PROCESSES = r"""[CmdletBinding(SupportsShouldProcess)]
param ()
$ErrorActionPreference = 'Stop'
$Ansible.Changed = $false
%(processes)s
$Ansible.Result = @{ processes = ConvertTo-Json -InputObject @($processes) -Depth 3 }
""" % {"processes": _PROCESSES}

SCRIPTS = {"snapshot": SNAPSHOT, "wsl_path": WSL_PATH, "processes": PROCESSES}
