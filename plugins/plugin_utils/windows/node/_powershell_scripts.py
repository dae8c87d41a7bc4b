# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The PowerShell scripts the Windows action plugins run through ansible.windows.win_powershell, by name.

No value is ever put into a script's text: what a script needs comes in as win_powershell `parameters` (data,
bound to the param block). Each script sets $Ansible.Result to ConvertTo-Json text of the CIM objects (property
names are never translated; the parsers in _cim_processes/_gpu_memory_counters read that text, as the captures show it),
sets $Ansible.Changed to $false (they only read; journal_append, which writes one journal line, sets it to $true),
and declares SupportsShouldProcess so that it runs in check mode.
The simulated node (_simulated_node) answers the same names.
"""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools._gpu_memory_counters import ADAPTER_CIM_CLASS, CIM_CLASS
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._powershell_literals import literal

# One round trip for everything the snapshot reads through PowerShell: the GPU Process Memory counters (the
# language-neutral CIM class, else the English counter paths, which only an English Windows has), the processes
# with their owners, the DirectX adapters' LUIDs from the registry with each one's PCI location, each Display-class PnP
# device's PCI location, and whether the Store WSL is installed.
# Win32_Process with each process's owner; sets $processes.
_PROCESSES = r"""# Get-Process -IncludeUserName needs an elevated session; without it each process's owner is asked of CIM
# (Win32_Process.GetOwner, which answers for the processes this user may query), and an owner it does not give stays
# unknown (null): with protect_users set, such a process is never ended.
$owners = @{}
$ownersRead = $true
try {
    Get-Process -IncludeUserName | ForEach-Object { $owners[[int]$_.Id] = $_.UserName }
}
catch {
    $owners = @{}
    $ownersRead = $false
}
# A VM memory process's owner SID is its VM's id (S-1-5-83-1-...); a process with a system process's name is one only
# when SYSTEM (S-1-5-18) owns it (any user can name a program csrss.exe). A WSL process's --vm-id names the WSL VM it serves.
$systemNames = @('csrss', 'wininit', 'winlogon', 'services', 'lsass', 'smss', 'system', 'idle', 'system idle process', 'registry',
    'memory compression', 'secure system', 'lsaiso')
# The user's shell is the program Winlogon starts (its Shell value, resolved under %SystemRoot%): the plugins compare each
# process's image path with it, never its name.
$winlogonShell = $null
try {
    $winlogonShell = (Get-ItemProperty -LiteralPath 'HKLM:\SOFTWARE\Microsoft\Windows NT\CurrentVersion\Winlogon' -Name 'Shell' -ErrorAction Stop).Shell
}
catch {
    $winlogonShell = $null
}
$systemRoot = $env:SystemRoot
# A service's process (Win32_Service.ProcessId): ended only with allow_daemons, as a Linux daemon is. Where
# Win32_Service cannot be read, every process's Services stays null (not known).
$servicesByPid = @{}
$servicesRead = $true
try {
    Get-CimInstance -ClassName Win32_Service -Filter 'ProcessId <> 0' | ForEach-Object {
        $servicePid = [int]$_.ProcessId
        if (-not $servicesByPid.ContainsKey($servicePid)) {
            $servicesByPid[$servicePid] = @()
        }
        $servicesByPid[$servicePid] += [string]$_.Name
    }
}
catch {
    $servicesByPid = @{}
    $servicesRead = $false
}
$processes = Get-CimInstance -ClassName Win32_Process | ForEach-Object {
    if (-not $ownersRead) {
        try {
            $owner = Invoke-CimMethod -InputObject $_ -MethodName 'GetOwner'
            if ($owner.ReturnValue -eq 0 -and $owner.User) {
                $owners[[int]$_.ProcessId] = '{0}\{1}' -f $owner.Domain, $owner.User
            }
        }
        catch {
            $owner = $null
        }
    }
    $ownerSid = $null
    if (($_.Name -like 'vmmem*') -or ($systemNames -contains ($_.Name -replace '\.exe$', ''))) {
        try {
            $ownerSid = (Invoke-CimMethod -InputObject $_ -MethodName 'GetOwnerSid').Sid
        }
        catch {
            $ownerSid = $null
        }
    }
    $services = $null
    if ($servicesRead) {
        $services = [string[]]@()
        if ($servicesByPid.ContainsKey([int]$_.ProcessId)) {
            $services = [string[]]$servicesByPid[[int]$_.ProcessId]
        }
    }
    $vmId = $null
    if (($_.Name -in @('wslrelay.exe', 'wslhost.exe')) -and ($_.CommandLine -match '--vm-id\s+(\{?[0-9A-Fa-f-]{36}\}?)')) {
        $vmId = $Matches[1]
    }
    [pscustomobject]@{
        ProcessId = $_.ProcessId
        ParentProcessId = $_.ParentProcessId
        Name = $_.Name
        ExecutablePath = $_.ExecutablePath
        CreationDate = $_.CreationDate
        SessionId = $_.SessionId
        User = $owners[[int]$_.ProcessId]
        OwnerSid = $ownerSid
        VmId = $vmId
        Services = $services
    }
}
"""

# The Host Compute Service's compute systems (HcsEnumerateComputeSystems of vmcompute.dll: JSON with each one's Id and
# Owner, "WSL" for the WSL VM), the one source that says which VM is WSL's. $computeSystems stays null, and $hcsError
# says why, where Add-Type is refused (Constrained Language Mode, AppLocker) or HCS does not answer (no elevation, no
# Hyper-V platform).
_HCS = r"""$computeSystems = $null
$hcsError = $null
try {
    if (-not ('GpuopsHcs' -as [type])) {
        Add-Type -TypeDefinition @'
using System;
using System.Runtime.InteropServices;

public static class GpuopsHcs
{
    [DllImport("vmcompute.dll", CharSet = CharSet.Unicode)]
    private static extern int HcsEnumerateComputeSystems(string query, out IntPtr computeSystems, out IntPtr result);

    public static string Enumerate()
    {
        IntPtr systems;
        IntPtr result;
        int hr = HcsEnumerateComputeSystems("{}", out systems, out result);
        try
        {
            if (hr != 0)
            {
                Marshal.ThrowExceptionForHR(hr);
            }
            return systems == IntPtr.Zero ? "[]" : Marshal.PtrToStringUni(systems);
        }
        finally
        {
            if (systems != IntPtr.Zero)
            {
                Marshal.FreeCoTaskMem(systems);
            }
            if (result != IntPtr.Zero)
            {
                Marshal.FreeCoTaskMem(result);
            }
        }
    }
}
'@
    }
    $computeSystems = [GpuopsHcs]::Enumerate()
}
catch {
    $hcsError = $_.Exception.Message
}
"""

# The PCI location (bus, device, function) of the adapter with a LUID, from the graphics kernel: D3DKMTOpenAdapterFromLuid
# and D3DKMTQueryAdapterInfo(KMTQAITYPE_ADAPTERADDRESS) in gdi32.dll, the one source that links a LUID to a PCI
# location (the DirectX registry key has none). Null when the kernel does not answer; $d3dkmtError says why when
# Add-Type itself is refused.
_PCI_ADDRESS = r"""$d3dkmtError = $null
if (-not ('GpuopsD3dkmt' -as [type])) {
    try {
        Add-Type -TypeDefinition @'
using System;
using System.Runtime.InteropServices;

public static class GpuopsD3dkmt
{
    [StructLayout(LayoutKind.Sequential)]
    private struct OpenAdapterFromLuid { public uint LowPart; public int HighPart; public uint Adapter; }

    [StructLayout(LayoutKind.Sequential)]
    private struct AdapterAddress { public uint Bus; public uint Device; public uint Function; }

    [StructLayout(LayoutKind.Sequential)]
    private struct QueryAdapterInfo { public uint Adapter; public int Type; public IntPtr Data; public uint DataSize; }

    [StructLayout(LayoutKind.Sequential)]
    private struct CloseAdapter { public uint Adapter; }

    private const int KmtqaitypeAdapterAddress = 6;

    [DllImport("gdi32.dll")]
    private static extern int D3DKMTOpenAdapterFromLuid(ref OpenAdapterFromLuid open);

    [DllImport("gdi32.dll")]
    private static extern int D3DKMTQueryAdapterInfo(ref QueryAdapterInfo query);

    [DllImport("gdi32.dll")]
    private static extern int D3DKMTCloseAdapter(ref CloseAdapter close);

    public static uint[] Address(long luid)
    {
        OpenAdapterFromLuid open = new OpenAdapterFromLuid();
        open.LowPart = (uint)(luid & 0xFFFFFFFF);
        open.HighPart = (int)(luid >> 32);
        if (D3DKMTOpenAdapterFromLuid(ref open) != 0)
        {
            return null;
        }
        IntPtr data = Marshal.AllocHGlobal(Marshal.SizeOf(typeof(AdapterAddress)));
        try
        {
            QueryAdapterInfo query = new QueryAdapterInfo();
            query.Adapter = open.Adapter;
            query.Type = KmtqaitypeAdapterAddress;
            query.Data = data;
            query.DataSize = (uint)Marshal.SizeOf(typeof(AdapterAddress));
            if (D3DKMTQueryAdapterInfo(ref query) != 0)
            {
                return null;
            }
            AdapterAddress address = (AdapterAddress)Marshal.PtrToStructure(data, typeof(AdapterAddress));
            return new uint[] { address.Bus, address.Device, address.Function };
        }
        finally
        {
            Marshal.FreeHGlobal(data);
            CloseAdapter close = new CloseAdapter();
            close.Adapter = open.Adapter;
            D3DKMTCloseAdapter(ref close);
        }
    }
}
'@
    }
    catch {
        # Constrained Language Mode or AppLocker: no adapter location from the kernel; the snapshot joins by the PnP
        # device's location, then by name, and says which.
        $d3dkmtError = $_.Exception.Message
    }
}
"""

# Each Display-class PnP device (Win32_PnPEntity): its instance id, name, whether it is present, its state
# (Status, and ConfigManagerErrorCode: 0 working, else the device's problem code, in any language), and its
# DEVPKEY_Device_BusNumber and DEVPKEY_Device_Address as Get-PnpDeviceProperty gives them (KeyName, Type, Data), so
# that each adapter is joined to its nvidia-smi GPU by PCI location; sets $pnpLocations ($null and $pnpError when the
# PnpDevice module does not answer: pnputil's listing is read then). A device without the keys (a virtual display)
# has no location.
_PNP_LOCATIONS = r"""$pnpLocations = $null
$pnpError = $null
try {
    $devices = Get-PnpDevice -Class 'Display' | ForEach-Object {
        $device = $_
        $properties = @()
        try {
            $properties = @(Get-PnpDeviceProperty -InstanceId $device.InstanceId -KeyName 'DEVPKEY_Device_BusNumber', 'DEVPKEY_Device_Address' |
                Select-Object -Property 'KeyName', 'Type', 'Data')
        }
        catch {
            $properties = @()
        }
        # the number, whether the module gives it as a UInt32 or as its enum (CM_PROB_...); null when not given
        $problem = $null
        if ($null -ne $device.ConfigManagerErrorCode) {
            $problem = [int]$device.ConfigManagerErrorCode
        }
        [pscustomobject]@{
            InstanceId = $device.InstanceId
            FriendlyName = $device.FriendlyName
            Manufacturer = $device.Manufacturer
            Present = $device.Present
            Status = [string]$device.Status
            ConfigManagerErrorCode = $problem
            Properties = $properties
        }
    }
    $pnpLocations = ConvertTo-Json -InputObject @($devices) -Depth 4
}
catch {
    $pnpError = $_.Exception.Message
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
        Select-Object -Property 'Name', 'DedicatedUsage', 'SharedUsage', 'LocalUsage', 'NonLocalUsage', 'TotalCommitted'
    $memory.json = ConvertTo-JsonText $rows
}
catch {
    $memory.error = $_.Exception.Message
    try {
        $paths = '\GPU Process Memory(*)\Dedicated Usage', '\GPU Process Memory(*)\Shared Usage'
        $samples = (Get-Counter -Counter $paths).CounterSamples | Select-Object -Property 'Path', 'CookedValue'
        $memory.source = 'counter'
        $memory.json = ConvertTo-JsonText $samples
    }
    catch {
        $memory.source = $null
        $memory.error = '{0} / {1}' -f $memory.error, $_.Exception.Message
    }
}

$adapterMemory = @{ source = 'cim'; json = ''; error = $null }
try {
    $adapterRows = Get-CimInstance -ClassName %(adapter_class)s | Select-Object -Property 'Name', 'DedicatedUsage', 'SharedUsage'
    $adapterMemory.json = ConvertTo-JsonText $adapterRows
}
catch {
    $adapterMemory.source = $null
    $adapterMemory.error = $_.Exception.Message
}

%(processes)s
%(hcs)s
%(pnp_locations)s
%(pci_address)s
$adapters = Get-ChildItem -LiteralPath 'HKLM:\SOFTWARE\Microsoft\DirectX' -ErrorAction SilentlyContinue | ForEach-Object {
    $values = Get-ItemProperty -LiteralPath $_.PSPath
    if ($null -ne $values.AdapterLuid) {
        $address = $null
        try {
            $address = [GpuopsD3dkmt]::Address([long]$values.AdapterLuid)
        }
        catch {
            $address = $null
        }
        [pscustomobject]@{
            Key = $_.PSChildName
            Description = $values.Description
            AdapterLuid = [string]$values.AdapterLuid
            VendorId = $values.VendorId
            DeviceId = $values.DeviceId
            SubSysId = $values.SubSysId
            RevisionId = $values.RevisionId
            BusNumber = if ($address) { $address[0] } else { $null }
            DeviceNumber = if ($address) { $address[1] } else { $null }
            FunctionNumber = if ($address) { $address[2] } else { $null }
        }
    }
}

$Ansible.Result = @{
    process_memory = $memory
    adapter_memory = $adapterMemory
    processes = ConvertTo-JsonText $processes
    winlogon_shell = $winlogonShell
    system_root = $systemRoot
    adapters = ConvertTo-JsonText $adapters
    pnp_locations = $pnpLocations
    pnp_error = $pnpError
    d3dkmt_error = $d3dkmtError
    store_wsl = Test-Path -LiteralPath $WslPath -PathType Leaf
    compute_systems = $computeSystems
    hcs_error = $hcsError
}
""" % {"cim_class": literal(CIM_CLASS), "adapter_class": literal(ADAPTER_CIM_CLASS), "processes": _PROCESSES,
       "pnp_locations": _PNP_LOCATIONS, "pci_address": _PCI_ADDRESS, "hcs": _HCS}

# Whether a file exists (the Store WSL's wsl.exe), the path given as data.
WSL_PATH = r"""[CmdletBinding(SupportsShouldProcess)]
param (
    [Parameter(Mandatory)]
    [string]$Path
)
$Ansible.Changed = $false
$Ansible.Result = @{ exists = Test-Path -LiteralPath $Path -PathType Leaf }
"""

# A fresh process list alone (pid + creation time: what win_gpu_reset checks before each end).
PROCESSES = r"""[CmdletBinding(SupportsShouldProcess)]
param ()
$ErrorActionPreference = 'Stop'
$Ansible.Changed = $false
%(processes)s
# $PID: the process this script runs in (Ansible's module), whose ancestors are the run's own connection.
$Ansible.Result = @{
    processes = ConvertTo-Json -InputObject @($processes) -Depth 3
    own_pid = $PID
    winlogon_shell = $winlogonShell
    system_root = $systemRoot
}
""" % {"processes": _PROCESSES}

# The process list with HCS's compute systems: which VM memory process is the WSL VM, and whose (wsl_shutdown's record
# of the VM before it acts, and its check after).
WSL_VMS = r"""[CmdletBinding(SupportsShouldProcess)]
param ()
$ErrorActionPreference = 'Stop'
$Ansible.Changed = $false
%(processes)s
%(hcs)s
$Ansible.Result = @{
    processes = ConvertTo-Json -InputObject @($processes) -Depth 3
    winlogon_shell = $winlogonShell
    system_root = $systemRoot
    compute_systems = $computeSystems
    hcs_error = $hcsError
}
""" % {"processes": _PROCESSES, "hcs": _HCS}

# One journal line appended (the record's JSON text, as data): one write of its UTF-8 bytes and a newline, flushed to
# the disk before the action goes ahead. A missing folder is made with its DACL in the one call that creates it (the
# security descriptor goes to CreateDirectory: [System.IO.Directory]::CreateDirectory(path, DirectorySecurity) on
# Windows PowerShell 5.1, [System.IO.FileSystemAclExtensions]::CreateDirectory on PowerShell 7), owned by Administrators,
# protected, SYSTEM and Administrators only: no moment with an inherited DACL, and an existing folder is never rewritten.
# Refused: a reparse point (junction, symbolic link, mount point) in ANY component of the path, dangling or not, a folder
# or file owned by anyone else (planted before the first run: ProgramData lets users create folders) or whose DACL lets
# anyone else write or create in it (a folder an administrator made there inherits "Users may create files"), a journal
# file with more than one hard link (another name for the same bytes, which a user may have made).
# Acts: in check mode it creates and writes nothing (no action runs then either).
_JOURNAL_GUARDS = r"""# Only SYSTEM (S-1-5-18) and the Administrators group (S-1-5-32-544) may own or write the journal's folder and file.
$trusted = @('S-1-5-18', 'S-1-5-32-544')
$fullPath = [System.IO.Path]::GetFullPath($Path)
$folder = [System.IO.Path]::GetDirectoryName($fullPath)
# Each component's own attributes (GetFileAttributesEx: a link is read, never followed), so a junction or link whose
# target is gone - which Test-Path calls absent - is refused too; only a component that does not exist is passed.
function Assert-NoReparsePoint($itemPath) {
    $at = $itemPath
    while ($at) {
        $attributes = $null
        try {
            $attributes = [System.IO.File]::GetAttributes($at)
        }
        catch [System.IO.FileNotFoundException], [System.IO.DirectoryNotFoundException] {
            $attributes = $null
        }
        if (($null -ne $attributes) -and ($attributes -band [System.IO.FileAttributes]::ReparsePoint)) {
            throw ('{0} is a reparse point (a junction or a link): the journal is never written through one' -f $at)
        }
        $at = [System.IO.Path]::GetDirectoryName($at)
    }
}
# The rights that let someone change what is in a folder or file: WriteData/CreateFiles (0x2), AppendData/
# CreateDirectories (0x4), WriteExtendedAttributes (0x10), DeleteSubdirectoriesAndFiles (0x40), WriteAttributes (0x100),
# Delete (0x10000), ChangePermissions (0x40000), TakeOwnership (0x80000), GENERIC_ALL (0x10000000), GENERIC_WRITE
# (0x40000000). CREATOR OWNER (S-1-3-0) on an inherit-only entry becomes the creator's, this elevated run's.
$writeRights = 0x500D0156
function Test-Trusted($itemPath) {
    $acl = Get-Acl -LiteralPath $itemPath
    $owner = $acl.GetOwner([System.Security.Principal.SecurityIdentifier]).Value
    if ($trusted -notcontains $owner) {
        throw ('{0} is owned by {1}, not by SYSTEM or Administrators: refused (remove it, or choose another journal_path)' -f $itemPath, $owner)
    }
    foreach ($entry in $acl.GetAccessRules($true, $true, [System.Security.Principal.SecurityIdentifier])) {
        $sid = $entry.IdentityReference.Value
        $inheritOnly = ($entry.PropagationFlags -band [System.Security.AccessControl.PropagationFlags]::InheritOnly) -ne 0
        if (($entry.AccessControlType -ne 'Allow') -or ($trusted -contains $sid) -or ($inheritOnly -and ($sid -eq 'S-1-3-0'))) {
            continue
        }
        $rights = [int64][int]$entry.FileSystemRights
        if (($rights -band $writeRights) -ne 0) {
            $how = if ($entry.IsInherited) { ', inherited' } else { '' }
            $why = '{0} lets {1} write or create in it (rights 0x{2:X}{3}): only SYSTEM and Administrators may, refused ' -f $itemPath, $sid, $rights, $how
            throw ($why + '(remove it so that it is made with its own DACL, or choose another journal_path)')
        }
    }
}
# The folder and the journal file where they exist: trusted owner and DACL, and the file with no second name.
function Assert-ExistingTrusted {
    if ([System.IO.Directory]::Exists($folder)) {
        Test-Trusted $folder
    }
    if ([System.IO.File]::Exists($fullPath)) {
        Test-Trusted $fullPath
        if ((Get-Item -LiteralPath $fullPath -Force).LinkType -eq 'HardLink') {
            $why = '{0} has more than one hard link (another name for the same file): refused (remove the other names, or choose another journal_path)'
            throw ($why -f $fullPath)
        }
    }
}
"""

JOURNAL_APPEND = r"""[CmdletBinding(SupportsShouldProcess)]
param (
    [Parameter(Mandatory)]
    [string]$Path,
    [Parameter(Mandatory)]
    [string]$Line
)
$ErrorActionPreference = 'Stop'
$Ansible.Changed = $false
if ($Line.Contains("`n") -or $Line.Contains("`r")) {
    throw 'a journal line holds no newline'
}
if (-not $PSCmdlet.ShouldProcess($Path, 'append a journal line')) {
    $Ansible.Result = @{ written = 0 }
    return
}
%(guards)s$security = [System.Security.AccessControl.DirectorySecurity]::new()
$security.SetOwner([System.Security.Principal.SecurityIdentifier]::new('S-1-5-32-544'))
$security.SetAccessRuleProtection($true, $false)
foreach ($sid in $trusted) {
    $identity = [System.Security.Principal.SecurityIdentifier]::new($sid)
    $rule = [System.Security.AccessControl.FileSystemAccessRule]::new($identity, 'FullControl', 'ContainerInherit, ObjectInherit', 'None', 'Allow')
    $security.AddAccessRule($rule)
}
Assert-NoReparsePoint $fullPath
if (-not [System.IO.Directory]::Exists($folder)) {
    if ($PSVersionTable.PSEdition -eq 'Core') {
        [void][System.IO.FileSystemAclExtensions]::CreateDirectory($security, $folder)
    }
    else {
        [void][System.IO.Directory]::CreateDirectory($folder, $security)
    }
}
# again after the creation: a link planted while the folder was made is refused too
Assert-NoReparsePoint $fullPath
Assert-ExistingTrusted
$bytes = [System.Text.UTF8Encoding]::new($false).GetBytes($Line + "`n")
$stream = [System.IO.FileStream]::new($fullPath, [System.IO.FileMode]::Append, [System.IO.FileAccess]::Write, [System.IO.FileShare]::Read)
try {
    $stream.Write($bytes, 0, $bytes.Length)
    $stream.Flush($true)
}
finally {
    $stream.Dispose()
}
$Ansible.Changed = $true
$Ansible.Result = @{ written = $bytes.Length }
""" % {"guards": _JOURNAL_GUARDS}

# What journal_append would refuse, asked without writing (check mode's run of win_gpu_reset asks it first, so that it
# predicts the real run's refusal): a reparse point in the path, an untrusted folder or file where they exist.
JOURNAL_CHECK = r"""[CmdletBinding(SupportsShouldProcess)]
param (
    [Parameter(Mandatory)]
    [string]$Path
)
$ErrorActionPreference = 'Stop'
$Ansible.Changed = $false
%(guards)s
Assert-NoReparsePoint $fullPath
Assert-ExistingTrusted
$Ansible.Result = @{ ok = $true }
""" % {"guards": _JOURNAL_GUARDS}

# The journal's last TailBytes bytes, base64 (the bytes as written, whatever the console's code page); cut: the tail
# starts inside a line. A missing journal is an empty one.
JOURNAL_READ = r"""[CmdletBinding(SupportsShouldProcess)]
param (
    [Parameter(Mandatory)]
    [string]$Path,
    [Parameter(Mandatory)]
    [long]$TailBytes
)
$ErrorActionPreference = 'Stop'
$Ansible.Changed = $false
if (-not [System.IO.File]::Exists($Path)) {
    $Ansible.Result = @{ exists = $false; cut = $false; base64 = '' }
    return
}
$stream = [System.IO.FileStream]::new($Path, [System.IO.FileMode]::Open, [System.IO.FileAccess]::Read, [System.IO.FileShare]::ReadWrite)
try {
    $cut = $stream.Length -gt $TailBytes
    if ($cut) {
        [void]$stream.Seek(-$TailBytes, [System.IO.SeekOrigin]::End)
    }
    $buffer = [byte[]]::new($stream.Length - $stream.Position)
    $read = 0
    while ($read -lt $buffer.Length) {
        $got = $stream.Read($buffer, $read, $buffer.Length - $read)
        if ($got -eq 0) {
            break
        }
        $read += $got
    }
}
finally {
    $stream.Dispose()
}
$Ansible.Result = @{ exists = $true; cut = $cut; base64 = [Convert]::ToBase64String($buffer, 0, $read) }
"""

# Ends processes by pid and creation time (_end_by_handle): each opened by its pid, its creation time compared on that
# handle, that handle terminated, so a pid reused between the check and the end is never ended. A tree is given member
# by member (deepest first). Acts: not run in check mode. Where Add-Type is refused it says so (unavailable).
TERMINATE = r"""[CmdletBinding(SupportsShouldProcess)]
param (
    [Parameter(Mandatory)]
    [AllowEmptyCollection()]
    [long[]]$ProcessIds,
    [Parameter(Mandatory)]
    [AllowEmptyCollection()]
    [long[]]$CreationTimesMs
)
$ErrorActionPreference = 'Stop'
$Ansible.Changed = $false
if ($ProcessIds.Count -ne $CreationTimesMs.Count) {
    throw 'one creation time per process id'
}
if (-not ('GpuopsTerminate' -as [type])) {
    try {
        Add-Type -TypeDefinition @'
using System;
using System.Runtime.InteropServices;

public static class GpuopsTerminate
{
    private const uint ProcessTerminate = 0x0001;
    private const uint ProcessQueryLimitedInformation = 0x1000;
    private const long UnixEpochFileTime = 116444736000000000L;

    [DllImport("kernel32.dll", SetLastError = true)]
    private static extern IntPtr OpenProcess(uint access, bool inherit, uint processId);

    [DllImport("kernel32.dll", SetLastError = true)]
    private static extern bool GetProcessTimes(IntPtr process, out long creation, out long exit, out long kernel, out long user);

    [DllImport("kernel32.dll", SetLastError = true)]
    private static extern bool TerminateProcess(IntPtr process, uint exitCode);

    [DllImport("kernel32.dll", SetLastError = true)]
    private static extern bool CloseHandle(IntPtr handle);

    // Whether Windows marks the process critical (ending it bugchecks the host): TerminateProcess does not refuse one,
    // as taskkill does, so the script asks first (Windows 8.1 / Server 2012 R2 and later).
    [DllImport("kernel32.dll", SetLastError = true)]
    private static extern bool IsProcessCritical(IntPtr process, out bool critical);

    // One process, by the handle opened for it: its creation time is compared on that handle, and that handle is
    // terminated, so the pid cannot pass to another process between the check and the end.
    // -> { outcome: 0 ended, 1 could not open (error: the Win32 code; 87 when no process has the pid), 2 another
    // process now (its creation time in ms), 3 terminate failed (error), 4 a critical process (never ended; error: the
    // Win32 code when Windows could not say whether it is one) }
    public static long[] End(uint processId, long creationTimeMs)
    {
        IntPtr handle = OpenProcess(ProcessTerminate | ProcessQueryLimitedInformation, false, processId);
        if (handle == IntPtr.Zero)
        {
            return new long[] { 1, Marshal.GetLastWin32Error() };
        }
        try
        {
            long creation, exit, kernel, user;
            if (!GetProcessTimes(handle, out creation, out exit, out kernel, out user))
            {
                return new long[] { 1, Marshal.GetLastWin32Error() };
            }
            long createdMs = (creation - UnixEpochFileTime) / 10000;
            if (createdMs != creationTimeMs)
            {
                return new long[] { 2, createdMs };
            }
            bool critical;
            if (!IsProcessCritical(handle, out critical))
            {
                return new long[] { 4, Marshal.GetLastWin32Error() };
            }
            if (critical)
            {
                return new long[] { 4, 0 };
            }
            if (!TerminateProcess(handle, 1))
            {
                return new long[] { 3, Marshal.GetLastWin32Error() };
            }
            return new long[] { 0, 0 };
        }
        finally
        {
            CloseHandle(handle);
        }
    }
}
'@
    }
    catch {
        # Constrained Language Mode or AppLocker: the caller falls back to taskkill, and says so.
        $Ansible.Result = @{ unavailable = $_.Exception.Message; results = '[]' }
        return
    }
}
$outcomes = @('ended', 'not_opened', 'pid_reused', 'not_terminated', 'critical')
$results = for ($at = 0; $at -lt $ProcessIds.Count; $at++) {
    $processId = $ProcessIds[$at]
    if (-not $PSCmdlet.ShouldProcess([string]$processId, 'terminate')) {
        continue
    }
    $answer = [GpuopsTerminate]::End([uint32]$processId, $CreationTimesMs[$at])
    if ($answer[0] -eq 0) {
        $Ansible.Changed = $true
    }
    [pscustomobject]@{
        ProcessId = $processId
        Outcome = $outcomes[$answer[0]]
        Code = $answer[1]
    }
}
$Ansible.Result = @{ results = ConvertTo-Json -InputObject @($results) -Depth 2 }
"""

# Where Add-Type is refused (Constrained Language Mode, AppLocker): the same members, each held by a handle while it is
# checked and ended, with no compiled code. Get-Process's object opens the process when its Handle is read and keeps that
# handle; StartTime is read on it, and while it is open Windows gives the pid to no other process, so `taskkill /F /PID`
# (never /T: a child started after the tree was read is not taken) can only end the process whose creation time was
# compared. taskkill refuses a critical system process itself. Its exit code decides; its words are kept for the report.
# Acts: not run in check mode.
TERMINATE_HELD = r"""[CmdletBinding(SupportsShouldProcess)]
param (
    [Parameter(Mandatory)]
    [AllowEmptyCollection()]
    [long[]]$ProcessIds,
    [Parameter(Mandatory)]
    [AllowEmptyCollection()]
    [long[]]$CreationTimesMs
)
$ErrorActionPreference = 'Stop'
$Ansible.Changed = $false
if ($ProcessIds.Count -ne $CreationTimesMs.Count) {
    throw 'one creation time per process id'
}
$unixEpochTicks = 621355968000000000
$results = for ($at = 0; $at -lt $ProcessIds.Count; $at++) {
    $processId = $ProcessIds[$at]
    if (-not $PSCmdlet.ShouldProcess([string]$processId, 'terminate')) {
        continue
    }
    $process = Get-Process -Id $processId -ErrorAction SilentlyContinue
    if ($null -eq $process) {
        [pscustomobject]@{ ProcessId = $processId; Outcome = 'not_opened'; Code = 87; Message = $null }
        continue
    }
    try {
        $null = $process.Handle
        $created = [long][Math]::Floor([decimal]($process.StartTime.ToUniversalTime().Ticks - $unixEpochTicks) / 10000)
    }
    catch {
        [pscustomobject]@{ ProcessId = $processId; Outcome = 'not_opened'; Code = 5; Message = $_.Exception.Message }
        continue
    }
    if ($created -ne $CreationTimesMs[$at]) {
        [pscustomobject]@{ ProcessId = $processId; Outcome = 'pid_reused'; Code = $created; Message = $null }
        continue
    }
    # Windows PowerShell 5.1 turns a native program's stderr line into a terminating error under 'Stop'
    $ErrorActionPreference = 'Continue'
    $said = taskkill.exe /F /PID $processId 2>&1 | Out-String
    $exitCode = $LASTEXITCODE
    $ErrorActionPreference = 'Stop'
    $outcome = 'not_terminated'
    if ($exitCode -eq 0) {
        $outcome = 'ended'
        $Ansible.Changed = $true
    }
    [pscustomobject]@{ ProcessId = $processId; Outcome = $outcome; Code = $exitCode; Message = $said.Trim() }
}
$Ansible.Result = @{ results = ConvertTo-Json -InputObject @($results) -Depth 2 }
"""

# The host's OEM and ANSI code pages from the registry (what the console tools write in: quser, taskkill, pnputil),
# read once per node by TargetNode and given to _output_encoding.
CODE_PAGE = r"""[CmdletBinding(SupportsShouldProcess)]
param ()
$ErrorActionPreference = 'Stop'
$Ansible.Changed = $false
$values = Get-ItemProperty -LiteralPath 'HKLM:\SYSTEM\CurrentControlSet\Control\Nls\CodePage'
$Ansible.Result = @{ oem = [string]$values.OEMCP; ansi = [string]$values.ACP }
"""

# The interactive sessions from the Remote Desktop Services API (WTSEnumerateSessions, WTSQuerySessionInformation:
# WTSUserName, WTSDomainName), numbers and names as Windows keeps them, in any language: what quser prints, without
# its columns. Where Add-Type is refused (Constrained Language Mode, AppLocker) it says so (unavailable) and the caller
# reads quser instead. own_session: the session this script runs in (0 over WinRM and SSH: a network logon).
SESSIONS = r"""[CmdletBinding(SupportsShouldProcess)]
param ()
$ErrorActionPreference = 'Stop'
$Ansible.Changed = $false
if (-not ('GpuopsWts' -as [type])) {
    try {
        Add-Type -TypeDefinition @'
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;

public class GpuopsWtsSession
{
    public int Id;
    public int State;
    public string Station;
    public string User;
    public string Domain;
}

public static class GpuopsWts
{
    [StructLayout(LayoutKind.Sequential)]
    private struct SessionInfo { public int SessionId; public IntPtr WinStationName; public int State; }

    private const int WtsUserName = 5;
    private const int WtsDomainName = 7;

    [DllImport("wtsapi32.dll", SetLastError = true)]
    private static extern bool WTSEnumerateSessionsW(IntPtr server, int reserved, int version, out IntPtr sessions, out int count);

    [DllImport("wtsapi32.dll", SetLastError = true)]
    private static extern bool WTSQuerySessionInformationW(IntPtr server, int sessionId, int infoClass, out IntPtr buffer, out int bytes);

    [DllImport("wtsapi32.dll")]
    private static extern void WTSFreeMemory(IntPtr memory);

    private static string Query(int sessionId, int infoClass)
    {
        IntPtr buffer;
        int bytes;
        if (!WTSQuerySessionInformationW(IntPtr.Zero, sessionId, infoClass, out buffer, out bytes))
        {
            return null;
        }
        try
        {
            return Marshal.PtrToStringUni(buffer);
        }
        finally
        {
            WTSFreeMemory(buffer);
        }
    }

    public static GpuopsWtsSession[] Sessions()
    {
        IntPtr sessions;
        int count;
        if (!WTSEnumerateSessionsW(IntPtr.Zero, 0, 1, out sessions, out count))
        {
            throw new System.ComponentModel.Win32Exception(Marshal.GetLastWin32Error());
        }
        List<GpuopsWtsSession> found = new List<GpuopsWtsSession>();
        try
        {
            int size = Marshal.SizeOf(typeof(SessionInfo));
            for (int at = 0; at < count; at++)
            {
                SessionInfo info = (SessionInfo)Marshal.PtrToStructure(new IntPtr(sessions.ToInt64() + at * size), typeof(SessionInfo));
                GpuopsWtsSession session = new GpuopsWtsSession();
                session.Id = info.SessionId;
                session.State = info.State;
                session.Station = Marshal.PtrToStringUni(info.WinStationName);
                session.User = Query(info.SessionId, WtsUserName);
                session.Domain = Query(info.SessionId, WtsDomainName);
                found.Add(session);
            }
        }
        finally
        {
            WTSFreeMemory(sessions);
        }
        return found.ToArray();
    }
}
'@
    }
    catch {
        $Ansible.Result = @{ unavailable = $_.Exception.Message; sessions = '[]' }
        return
    }
}
$rows = [GpuopsWts]::Sessions() | ForEach-Object {
    [pscustomobject]@{
        SessionId = $_.Id
        State = $_.State
        WinStationName = $_.Station
        UserName = $_.User
        DomainName = $_.Domain
    }
}
$Ansible.Result = @{
    unavailable = $null
    sessions = ConvertTo-Json -InputObject @($rows) -Depth 2
    own_session = (Get-Process -Id $PID).SessionId
}
"""

SCRIPTS = {"snapshot": SNAPSHOT, "terminate": TERMINATE, "wsl_path": WSL_PATH, "processes": PROCESSES, "wsl_vms": WSL_VMS,
           "journal_append": JOURNAL_APPEND, "journal_check": JOURNAL_CHECK, "journal_read": JOURNAL_READ, "code_page": CODE_PAGE, "sessions": SESSIONS,
           "terminate_held": TERMINATE_HELD}
