# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated Windows GPU node, on the controller (module win_gpu_sim, host variable gpuops_windows_sim_root): its
entry points (_simulated_node), its state file and rules (_simulated_state), and its answers to the tools and the
named scripts with the shapes of the real captures (_simulated_tools, _simulated_scripts). Reached only through
windows/node/_remote_node's switch."""
