# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the node says, read and never changed: the driver through NVML or nvidia-smi, each probe in a child process with
a hard deadline (_deadline, _gpu_probe); the parsers of nvidia-smi, lsmod and modprobe, the kernel log with NVIDIA's
Xid catalog, the reset's output and DCGM's diagnostic (_nvsmi, _kmod, _kernel_log, _reset_output, _dcgm); PCI bus ids
(_pci); who holds the GPU device nodes, read straight from /proc (_procscan), by the devices' identity (_device_nodes),
the threads with file tables of their own (_threads) and /proc's files (_proc_files); each process's identity
(_process) and cgroup (_cgroup);
and which processes the init system counts as a GPU unit's members (_unit_members)."""
