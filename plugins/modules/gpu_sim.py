#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_sim: create or remove a simulated GPU node, for rehearsal and tests."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_sim
short_description: Create or remove a simulated GPU node, for rehearsal and tests
version_added: 1.0.0
description:
  - Builds a simulated GPU node under O(root) from a scenario, or removes one. Every other module of the collection
    works on it when the environment variable C(GPUOPS_SIM_ROOT) names O(root) (see RV(env)).
  - "What is simulated: NVML (nvidia-ml-py's own wrappers run on a Python stand-in for libnvidia-ml), the device nodes
    (regular files under C(<root>/dev/)), the kernel log (C(<root>/kernel.log)), and the commands C(nvidia-smi),
    C(modprobe), C(lsmod) and C(systemctl) under C(<root>/bin), which print what the real tools print."
  - "What is real: the processes that hold the devices, the services, zombies, signals and C(/proc). A holder's memory
    is counted while its process (pid and start time) exists, a zombie included; ghost memory stays until a reset
    of that GPU or a driver reload; a reset fails while anything holds that GPU; unloading C(nvidia) fails while a
    process holds a device file or a dependent module is loaded."
  - The scenario's processes run detached under a small supervisor that reaps them, so they outlive this module.
  - Running the module again with the same scenario changes nothing; another scenario replaces the node. The state
    a node reached (killed holders, stopped services, resets) is not compared.
  - See C(docs/simulation.md) in the collection for the state file and the rules.
author:
  - gpuops maintainers (@gpuops)
extends_documentation_fragment:
  - gpuops.remediation.attributes
  - gpuops.remediation.attributes.LINUX_GPU
attributes:
  check_mode:
    support: full
    details:
      - Reports the same C(changed) as the real run and creates, kills and removes nothing.
  diff_mode:
    support: none
options:
  state:
    description:
      - Whether the node should exist.
      - V(rebooted) reboots an existing node, the stand-in for C(ansible.builtin.reboot), which a local connection
        refuses. Every GPU is back on the bus without leaked memory, MIG mode stays as it was with a pending change
        applied, no MIG instance is left, the kernel log starts empty. Refused while a holder of the node still runs.
        Always changed.
    type: str
    choices: [present, absent, rebooted]
    default: present
  root:
    description:
      - Directory of the simulated node. Created when missing; an existing directory must be empty or hold a node.
      - O(state=absent) kills every process the node started and removes the directory.
    type: path
    required: true
  gpus:
    description: The GPUs, index by position. Without it the node has one NVIDIA H100 80GB HBM3.
    type: list
    elements: dict
    suboptions:
      name:
        description: Product name.
        type: str
        default: NVIDIA H100 80GB HBM3
      memory_mib:
        description: Total framebuffer memory in MiB.
        type: int
        default: 81559
      reserved_mib:
        description: Memory the driver reserves, in MiB (not part of used).
        type: int
        default: 552
      pci_bus_id:
        description: PCI bus id in any usual spelling (C(18:00.0), C(0000:18:00.0)); a distinct one is chosen when omitted.
        type: str
      uuid:
        description: GPU UUID; derived from O(root) and the index when omitted.
        type: str
      nvlink_peers:
        description: Indexes of the GPUs this one is joined to by NVLink (link N goes to the Nth peer).
        type: list
        elements: int
        default: []
      ghost_mib:
        description: Used memory that no live process accounts for; it stays until a reset or a driver reload.
        type: int
        default: 0
      recovery_action:
        description: What NVML's GPU recovery action field reports.
        type: str
        choices: [none, reset, reboot, drain_p2p, drain_and_reset]
        default: none
      lost:
        description: The GPU fell off the bus; NVML answers C(GPU is lost) and nvidia-smi cannot get its handle.
        type: bool
        default: false
      primary:
        description: The GPU drives the console; nvidia-smi refuses to reset it.
        type: bool
        default: false
      persistence_mode:
        description: Persistence mode.
        type: bool
        default: false
      compute_mode:
        description: Compute mode.
        type: str
        choices: [Default, Exclusive_Thread, Prohibited, Exclusive_Process]
        default: Default
      mig_mode:
        description: MIG mode (current and pending); omitted means the GPU does not support MIG.
        type: bool
      mig_instances:
        description:
          - The MIG GPU instances the GPU starts with (needs O(gpus[].mig_mode=true)), created in order as
            C(nvidia-smi mig -cgi <profile> -C) creates them (ids from 1, the lowest free placement, one full compute
            instance each), with their capabilities files and C(nvidia-caps) nodes. The real A100-SXM4-80GB and H100
            80GB HBM3 profiles; one that does not fit is refused with the driver's reason.
        type: list
        elements: dict
        default: []
        suboptions:
          profile:
            description: The profile, by name (C(1g.10gb)) or id (C(19)).
            type: str
            required: true
          ghost_mib:
            description: Used memory in this instance that no live process accounts for.
            type: int
            default: 0
      dcgm_diag:
        description:
          - What the simulated C(dcgmi diag) finds on this GPU (with O(dcgm)) - V(fail) a row remapping failure,
            V(warn) pending row remappings, in its C(software) and C(memory) tests. A reset or a reload does not
            change it (it stands for the hardware).
          - Like DCGM 4.2.3, the C(software) test also fails on a GPU without O(gpus[].persistence_mode).
        type: str
        choices: [pass, warn, fail]
        default: pass
  holders:
    description: Real processes that hold GPUs, started detached.
    type: list
    elements: dict
    default: []
    suboptions:
      kind:
        description:
          - How the process holds the device files.
          - C(fd) opens C(nvidia<N>), C(nvidiactl) and C(nvidia-uvm); C(mmap) maps C(nvidia<N>) and closes the file;
            C(inherited) holds fds its parent opened and exited; C(zombie) is an exited child whose parent runs on
            and never reaps it (the zombie holds the memory); C(ignores_term) ignores SIGTERM; C(leader_exited) holds
            the files in a thread after its main thread exited; C(leader_exited_ignores_term) does that and ignores SIGTERM.
          - C(term_checkpoint) has a SIGTERM handler that writes its RV(holders[].checkpoint) file and exits;
            C(stopped_checkpoint) has that handler and is stopped (SIGSTOP, state T) once it holds the files;
            C(blocks_term) blocks SIGTERM (sigprocmask); C(pidns_init) is the init (pid 1) of a PID namespace of its own,
            without a SIGTERM handler (needs root); C(pidns_init_checkpoint) is that with the checkpoint handler;
            C(vfork_parent) waits, holding the files, for a vfork child that never execs (a killable wait that
            C(/proc) shows as D).
          - C(second_node) opens them through nodes of its own outside C(<root>/dev) (hard links, since a simulated
            device is known by its inode, as a real one by its major and minor); C(mount_namespace) opens them through
            a bind mount of C(<root>/dev) in a mount namespace of its own (needs root); C(own_fd_table) opens them
            in a thread that unshared its file table (the leader, alive, holds nothing); C(o_path) only names them
            with C(O_PATH) descriptors, which never open a device; it is no holder, the driver does not list it,
            and its O(holders[].memory_mib) is ignored.
        type: str
        choices: [fd, mmap, inherited, zombie, ignores_term, leader_exited, leader_exited_ignores_term, term_checkpoint,
                  blocks_term, stopped_checkpoint, pidns_init, pidns_init_checkpoint, vfork_parent, second_node,
                  mount_namespace, own_fd_table, o_path]
        default: fd
      gpus:
        description:
          - Indexes of the GPUs it holds. V([]) (with O(holders[].kind=fd)) makes a client of the whole driver that holds
            only C(<root>/dev/nvidiactl), like a monitoring agent or an NVML client; it blocks the reset of every GPU.
        type: list
        elements: int
        default: [0]
      memory_mib:
        description: GPU memory it uses on each of its GPUs, in MiB.
        type: int
        default: 1024
      mig_instance:
        description:
          - The MIG GPU instance (its id) of its first GPU it runs in, with that instance's compute instance 0; it opens
            their C(nvidia-caps) nodes as well, and its memory is that instance's.
        type: int
      name:
        description: Its name, as argv[0] and as the kernel's comm (first 15 bytes); any text.
        type: str
        default: python3
      user:
        description: User to run as; needs root when it is not the current user.
        type: str
      type:
        description: How NVML lists it, compute (C(C)), graphics (C(G)) or both.
        type: str
        choices: [C, G, C+G]
        default: C
      parent_name:
        description: For O(holders[].kind=zombie), the name of the parent that never reaps it.
        type: str
        default: job-launcher
      freezer:
        description:
          - Put the holder in a cgroup of its own of this hierarchy, the v1 freezer or cgroup v2 (needs root and the
            hierarchy mounted; C(state=absent) thaws and removes it). Its path is RV(holders[].cgroup).
          - Only with O(holders[].kind) V(fd), V(ignores_term), V(blocks_term) or V(term_checkpoint).
        type: str
        choices: [v1, v2]
      freeze:
        description:
          - When the holder's cgroup (O(holders[].freezer)) is frozen. V(never); V(at_start) once it holds the files;
            V(on_term) by its own SIGTERM handler, which freezes it (so that it outlives SIGKILL under the v1 freezer)
            and, once thawed, writes its RV(holders[].checkpoint) and exits.
        type: str
        choices: [never, at_start, on_term]
        default: never
      parent_gpus:
        description:
          - For O(holders[].kind=zombie), indexes of the GPUs its parent holds open itself (C(nvidia<N>), C(nvidiactl),
            C(nvidia-uvm)), a live job of its own; by default the parent holds none.
        type: list
        elements: int
        default: []
      running:
        description:
          - V(false) (the default) starts what a crash leaves behind, as a killed training script leaves its workers. The
            process that started the holder, the leader of its process group and session, exits at once, and the holder
            lives on, re-parented to the node's supervisor. The remediation modules end it by default.
          - V(true) starts a working program instead, a server that leads its own session and process group, started by
            the node's supervisor, which runs on. It is busy, and is ended only when selected or with C(end_running_jobs).
        type: bool
        default: false
      unit:
        description:
          - The systemd unit of O(units) in whose control group the holder runs (a real cgroup below a slice of the
            node's own; needs root). Only a holder that is not O(holders[].running).
        type: str
      unit_command:
        description:
          - Which command of the unit's current start put the holder in the background; the process that started it
            is that command, and C(systemctl show) lists its pid under this name (an C(ExecStart) holder's is the
            unit's C(ExecMainPID) too, the last one's when there are several).
          - Left out, the holder is what an earlier start of the unit left.
        type: str
        choices: [ExecStartPre, ExecStart, ExecStartPost]
  units:
    description:
      - systemd units of the scenario's own, for the holders that run in them (O(holders[].unit)). The node's
        C(systemctl show) answers for each, as systemd does for a C(Type=oneshot) unit whose commands put programs in
        the background and exited (C(MainPID) 0, the commands' pids listed).
    type: list
    elements: dict
    suboptions:
      name:
        description: The unit's name, C(NAME.service).
        type: str
        required: true
      active_state:
        description: What systemd says of it (C(ActiveState)).
        type: str
        choices: [active, activating, reloading, deactivating, inactive, failed]
        default: active
      sub_state:
        description:
          - Its C(SubState), for example C(auto-restart) for a unit that waits to start again after a failed run.
          - By default the usual one of O(units[].active_state) (C(exited) for an active oneshot unit).
        type: str
      result:
        description: Its C(Result), for example C(exit-code) after a failed start.
        type: str
        default: success
  services:
    description: GPU services to start as real background processes named like the real daemons.
    type: list
    elements: str
    choices: [nvidia-persistenced, nvidia-fabricmanager, nvidia-dcgm, display-manager]
    default: []
  kernel_log:
    description: Lines for the kernel log, written as they are.
    type: list
    elements: str
    default: []
  xid:
    description: Xid events, rendered into kernel log lines in the driver's format after O(kernel_log).
    type: list
    elements: dict
    default: []
    suboptions:
      xid:
        description: The Xid code.
        type: int
        required: true
      gpu:
        description: Index of the GPU it happened on.
        type: int
        default: 0
      pid:
        description: Process the driver names in the line.
        type: int
      process_name:
        description: Name of that process.
        type: str
      text:
        description: Text after the code and the process; a typical one for the code when omitted.
        type: str
  modules:
    description:
      - Kernel modules loaded at the start, in load order. C(gdrdrv) and C(nvidia_fs) stand for the modules outside
        NVIDIA's driver that use C(nvidia) (GDRCopy, GPUDirect Storage).
    type: list
    elements: str
    choices: [nvidia, nvidia_modeset, nvidia_uvm, nvidia_drm, nvidia_peermem, gdrdrv, nvidia_fs]
    default: [nvidia, nvidia_modeset, nvidia_uvm, nvidia_drm]
  pinned_modules:
    description: Modules something outside the simulation holds (one extra reference each), so they cannot be unloaded.
    type: list
    elements: str
    choices: [nvidia, nvidia_modeset, nvidia_uvm, nvidia_drm, nvidia_peermem, gdrdrv, nvidia_fs]
    default: []
  nvml_hang:
    description: Every NVML call and nvidia-smi run blocks for ever, like a driver stuck in D state.
    type: bool
    default: false
  dcgm:
    description:
      - Install NVIDIA DCGM's C(dcgmi) on the node (C(dcgmi diag -r <level> [-j] [-i <ids>]), the output and exit
        codes of DCGM 4.2.3). It reaches the host engine only while the C(nvidia-dcgm) service runs (O(services)).
      - Without it the node has no DCGM, as most nodes.
    type: bool
    default: false
  logind_sessions:
    description:
      - Install C(loginctl) on the node, answering as logind would for these login sessions (C(loginctl list-sessions),
        C(loginctl show-session --property=State --value ID)); a session not listed is gone. A process is in session
        C(ID) when its cgroup is C(session-ID.scope) (put it there through the cgroup file system).
      - Left out, the node has no logind, as a machine without systemd.
    type: list
    elements: dict
    suboptions:
      id:
        description: The session id, as in C(session-<id>.scope).
        type: str
        required: true
      state:
        description: What logind says of it.
        type: str
        choices: [online, active, closing]
        default: active
  dcgm_hang:
    description: C(dcgmi diag) never finishes (it ends once its caller is gone), for a caller's timeout.
    type: bool
    default: false
  reset_requires_nvlink_peers:
    description: nvidia-smi refuses to reset a GPU unless all its NVLink peers are reset in the same call.
    type: bool
    default: false
  driver_version:
    description: Driver version NVML and nvidia-smi report.
    type: str
    default: 590.48.01
  cuda_version:
    description: CUDA version NVML and nvidia-smi report.
    type: str
    default: "13.1"
notes:
  - The node's processes are detached children of a supervisor process that reaps them. Remove the node with
    O(state=absent) so they are killed.
seealso:
  - module: gpuops.remediation.gpu_holders_info
"""

EXAMPLES = r"""
- name: A node with ghost memory on GPU 0, a training job on GPU 1 and persistenced
  gpuops.remediation.gpu_sim:
    root: /tmp/gpusim
    gpus:
      - {name: NVIDIA H100 80GB HBM3, memory_mib: 81559, ghost_mib: 4096}
      - {name: NVIDIA H100 80GB HBM3, memory_mib: 81559}
    holders:
      - {kind: fd, gpus: [1], memory_mib: 2048, name: trainer}
      - {kind: zombie, gpus: [1], memory_mib: 768, name: zombie-worker}
    services: [nvidia-persistenced]
  register: node

- name: Take a snapshot of it
  gpuops.remediation.gpu_holders_info:
  environment: "{{ node.env }}"

- name: A GPU that fell off the bus
  gpuops.remediation.gpu_sim:
    root: /tmp/gpusim-lost
    gpus:
      - {lost: true}
    xid:
      - {xid: 79, gpu: 0}

- name: Remove the node and its processes
  gpuops.remediation.gpu_sim:
    root: /tmp/gpusim
    state: absent
"""

RETURN = r"""
root:
  description: The node's directory.
  returned: always
  type: str
  sample: /tmp/gpusim
env:
  description: The environment that points the other modules at this node.
  returned: always
  type: dict
  sample: {"GPUOPS_SIM_ROOT": "/tmp/gpusim"}
holders:
  description: The holder processes, in the order of O(holders); empty when absent or in check mode before creation.
  returned: always
  type: list
  elements: dict
  contains:
    pid:
      description: Process id of the process that holds the memory (for O(holders[].kind=zombie), the zombie).
      type: int
    start_time:
      description: Its start time in clock ticks since boot (C(/proc/<pid>/stat) field 22).
      type: int
    kind:
      description: How it holds the devices.
      type: str
    running:
      description: Whether it is a working program (O(holders[].running=true)), not a crash's leftover.
      type: bool
    name:
      description: Its name.
      type: str
    gpus:
      description: Indexes of the GPUs it holds.
      type: list
      elements: int
    memory_mib:
      description: Memory it uses on each of its GPUs.
      type: int
    type:
      description: C(C), C(G) or C(C+G).
      type: str
    user:
      description: The user it runs as, when one was asked for.
      type: str
    parent_pid:
      description: For a zombie, its parent that never reaps it.
      type: int
    parent_start_time:
      description: For a zombie, the start time of that parent.
      type: int
    cgroup:
      description: The cgroup directory O(holders[].freezer) or O(holders[].unit) put it in; null without one.
      type: str
    checkpoint:
      description:
        - For a holder with a TERM handler (O(holders[].kind=term_checkpoint), V(stopped_checkpoint),
          V(pidns_init_checkpoint)), the file its handler writes before it exits; null for the others.
      type: str
  sample: [{"pid": 4242, "start_time": 73695, "kind": "fd", "name": "trainer", "gpus": [1], "memory_mib": 2048,
            "type": "C", "user": null, "parent_pid": null, "parent_start_time": null}]
services:
  description: The simulated services, by name, and whether they run.
  returned: always
  type: dict
  sample: {"nvidia-persistenced": {"unit": "nvidia-persistenced.service", "pid": 4240, "start_time": 73690,
           "active": true, "children": []}}
"""

import hashlib
import json
import os

from ansible_collections.gpuops.remediation.plugins.module_utils._payload_imports import compile_each_file_once

compile_each_file_once()  # before the collection's other imports: zipimport compiles each of them once

from ansible_collections.gpuops.remediation.plugins.module_utils._module import GpuModule
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.plugins.module_utils._node import SIM_ROOT_ENV
from ansible_collections.gpuops.remediation.plugins.module_utils._safe_files import UnsafePath, open_dir
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_processes import SERVICES
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_rules import DEFAULT_MODULES, KNOWN_MODULES
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_state import SimError, load_state, process_exists, state_path
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_nvml import (  # noqa: F401 pylint: disable=unused-import
    SimNvmlLibrary as _sim_nvml_library,
)
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_programs import (  # noqa: F401 pylint: disable=unused-import
    main as _sim_programs_main,
)
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_dcgmi import (  # noqa: F401 pylint: disable=unused-import
    dcgmi as _sim_dcgmi_main,
)
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_tools import (  # noqa: F401 pylint: disable=unused-import
    main as _sim_tools_main,
)

# _sim_tools, _sim_nvml, _sim_programs and _sim_dcgmi are imported so that AnsiballZ ships them: gpu_sim copies their
# source into <root>/lib (_sim_build.LIB_FILES), where the simulated tools, NodeLayout.load_nvml and the node's processes
# load them (the tools import their siblings by name, on first use).

GPU_SPEC = dict(
    name=dict(type="str", default=sim.DEFAULT_GPU_NAME),
    memory_mib=dict(type="int", default=sim.DEFAULT_GPU_MEMORY_MIB),
    reserved_mib=dict(type="int", default=sim.DEFAULT_GPU_RESERVED_MIB),
    pci_bus_id=dict(type="str"),
    uuid=dict(type="str"),
    nvlink_peers=dict(type="list", elements="int", default=[]),
    ghost_mib=dict(type="int", default=0),
    recovery_action=dict(type="str", choices=list(sim.RECOVERY_ACTIONS), default="none"),
    lost=dict(type="bool", default=False),
    primary=dict(type="bool", default=False),
    persistence_mode=dict(type="bool", default=False),
    compute_mode=dict(type="str", choices=list(sim.COMPUTE_MODES), default="Default"),
    mig_mode=dict(type="bool"),
    mig_instances=dict(type="list", elements="dict", default=[], options=dict(
        profile=dict(type="str", required=True), ghost_mib=dict(type="int", default=0))),
    dcgm_diag=dict(type="str", choices=list(sim.DIAG_RESULTS), default="pass"),
)
HOLDER_SPEC = dict(
    kind=dict(type="str", choices=list(sim.HOLDER_KINDS), default="fd"),
    gpus=dict(type="list", elements="int", default=[0]),
    memory_mib=dict(type="int", default=1024),
    mig_instance=dict(type="int"),
    name=dict(type="str", default="python3"),
    user=dict(type="str"),
    type=dict(type="str", choices=list(sim.HOLDER_TYPES), default="C"),
    parent_name=dict(type="str", default="job-launcher"),
    freezer=dict(type="str", choices=["v1", "v2"]),
    freeze=dict(type="str", choices=list(sim.FREEZE_WHEN), default="never"),
    parent_gpus=dict(type="list", elements="int", default=[]),
    running=dict(type="bool", default=False),
    unit=dict(type="str"),
    unit_command=dict(type="str", choices=["ExecStartPre", "ExecStart", "ExecStartPost"]),
)
XID_SPEC = dict(
    xid=dict(type="int", required=True),
    gpu=dict(type="int", default=0),
    pid=dict(type="int"),
    process_name=dict(type="str"),
    text=dict(type="str"),
)
MODULE_CHOICES = list(KNOWN_MODULES)
ARGUMENT_SPEC = dict(
    state=dict(type="str", choices=["present", "absent", "rebooted"], default="present"),
    root=dict(type="path", required=True),
    gpus=dict(type="list", elements="dict", options=GPU_SPEC),
    holders=dict(type="list", elements="dict", options=HOLDER_SPEC, default=[]),
    services=dict(type="list", elements="str", choices=sorted(SERVICES), default=[]),
    kernel_log=dict(type="list", elements="str", default=[]),
    xid=dict(type="list", elements="dict", options=XID_SPEC, default=[]),
    modules=dict(type="list", elements="str", choices=MODULE_CHOICES, default=list(DEFAULT_MODULES)),
    pinned_modules=dict(type="list", elements="str", choices=MODULE_CHOICES, default=[]),
    nvml_hang=dict(type="bool", default=False),
    dcgm=dict(type="bool", default=False),
    dcgm_hang=dict(type="bool", default=False),
    logind_sessions=dict(type="list", elements="dict", options=dict(
        id=dict(type="str", required=True), state=dict(type="str", choices=["online", "active", "closing"], default="active"))),
    units=dict(type="list", elements="dict", options=dict(
        name=dict(type="str", required=True),
        active_state=dict(type="str", choices=["active", "activating", "reloading", "deactivating", "inactive", "failed"],
                          default="active"),
        sub_state=dict(type="str"), result=dict(type="str", default="success"))),
    reset_requires_nvlink_peers=dict(type="bool", default=False),
    driver_version=dict(type="str", default="590.48.01"),
    cuda_version=dict(type="str", default="13.1"),
)


def scenario(params):
    """The module's options minus state: what the node is built from."""
    return dict((key, value) for key, value in params.items() if key != "state")


def scenario_hash(spec):
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode("utf-8")).hexdigest()


def check_input(module, spec):
    """Refuse values the argument spec cannot express, naming the option and the value."""
    for number, gpu in enumerate(spec.get("gpus") or []):
        for key in ("memory_mib", "reserved_mib", "ghost_mib"):
            if gpu[key] < 0:
                module.fail_json(msg="gpus[%d].%s must not be negative: %d" % (number, key, gpu[key]))
    for number, holder in enumerate(spec["holders"]):
        if holder["memory_mib"] < 0:
            module.fail_json(msg="holders[%d].memory_mib must not be negative: %d" % (number, holder["memory_mib"]))
        if not holder["gpus"] and holder["kind"] != "fd":
            module.fail_json(msg="holders[%d].gpus: [] (a client of nvidiactl alone) needs kind fd, got kind %s"
                             % (number, holder["kind"]))
    missing = [name for name in spec["pinned_modules"] if name not in spec["modules"]]
    if missing:
        module.fail_json(msg="pinned_modules: %s not among modules %s" % (", ".join(missing), ", ".join(spec["modules"])))


def holders_result(state):
    result = []
    for holder in state.get("holders", []):
        if holder.get("role") != "holder":
            continue
        result.append({"pid": holder["pid"], "start_time": holder["start_time"], "kind": holder["kind"],
                       "name": holder["name"], "gpus": sorted(int(index) for index in holder["gpus"]),
                       "memory_mib": max(list(holder["gpus"].values()) or [0]), "type": holder["type"],
                       "user": holder.get("user"), "parent_pid": holder.get("parent_pid"),
                       "parent_start_time": holder.get("parent_start_time"), "checkpoint": holder.get("checkpoint"),
                       "cgroup": (holder.get("cgroup") or {}).get("dir"), "running": bool(holder.get("running"))})
    return result


def services_result(state):
    result = {}
    for name, service in state.get("services", {}).items():
        result[name] = {"unit": service["unit"], "pid": service["pid"], "start_time": service["start_time"],
                        "active": bool(service["active"] and process_exists(service["pid"], service["start_time"])),
                        "children": service.get("children", [])}
    return result


def refuse_untrusted_root(module, root):
    """The node's files are written, and its tools run, by whoever runs the modules (root on a test machine): a root, or
    the directory it is made in, that another user owns or can write (an empty directory a user made first at the
    /tmp path a playbook names, a node of theirs) is refused, naming the owner; the path is walked without a link."""
    existing = root
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    try:
        os.close(open_dir(existing, "root", holds_trusted=existing == root, shown=root))
    except UnsafePath as exc:
        module.fail_json(msg=str(exc), root=root)


def existing_state(module, root):
    """The node's state at root, None when root is missing or empty; fails on a directory that is no node."""
    refuse_untrusted_root(module, root)
    if not os.path.exists(root):
        return None
    if os.path.exists(state_path(root)):
        try:
            return load_state(root)
        except (SimError, ValueError) as exc:
            module.fail_json(msg="root %s holds a broken simulated node: %s" % (root, exc))
    if os.path.isdir(root) and not os.listdir(root):
        return None
    module.fail_json(msg="root %s exists and is not a simulated GPU node; refusing to use or remove it" % root)
    return None


def build(module, root, spec, digest):
    node_spec = dict(spec, spec_hash=digest)
    try:
        return sim.create_node(root, node_spec)
    except SimError as exc:
        module.fail_json(msg=str(exc), root=root)
    return None


def main():
    module = GpuModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    root = os.path.abspath(module.params["root"])
    spec = scenario(module.params)
    spec["root"] = root
    current = existing_state(module, root)
    result = dict(changed=False, root=root, env={SIM_ROOT_ENV: root}, holders=[], services={})

    if module.params["state"] == "absent":
        result["changed"] = current is not None or os.path.exists(root)
        if result["changed"] and not module.check_mode:
            sim.destroy_node(root)
        module.exit_json(**result)

    if module.params["state"] == "rebooted":
        if current is None:
            module.fail_json(msg="state=rebooted: root %s holds no simulated node" % root, root=root)
        result["changed"] = True
        if not module.check_mode:
            try:
                sim.reboot_node(root)
            except SimError as exc:
                module.fail_json(msg=str(exc), root=root)
        module.exit_json(**result)

    check_input(module, spec)
    try:
        sim.validate_spec(root, spec)
    except SimError as exc:
        module.fail_json(msg=str(exc), root=root)
    digest = scenario_hash(spec)
    if current is not None and current.get("spec_hash") == digest:
        result.update(holders=holders_result(current), services=services_result(current))
        module.exit_json(**result)

    result["changed"] = True
    if module.check_mode:
        module.exit_json(**result)
    if current is not None:
        sim.destroy_node(root)
    state = build(module, root, spec, digest)
    result.update(holders=holders_result(state), services=services_result(state))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
