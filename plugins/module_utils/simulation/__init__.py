# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated Linux GPU node that stands in for NVML, the kernel modules and systemd (module gpu_sim,
GPUOPS_SIM_ROOT): building and destroying a node (_sim_build), its state file and rules (_sim_state, _sim_rules), its
processes and their programs (_sim_processes, _sim_programs), and its NVML, dcgmi and tools (_sim_nvml, _sim_dcgmi,
_sim_tools). The run-time files are copied flat into a node's lib/ and import one another by bare name there; only
_node's switch reaches them from the real path."""
