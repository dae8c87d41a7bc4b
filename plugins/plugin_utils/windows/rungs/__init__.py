# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Windows rungs that act on the node, one method of win_gpu_reset a run (_reset_dispatch) over what every acting
rung needs (_acting_step): ending the holders (_kill_holders) by the terminate script that ends each process by its
own handle (_end_by_handle), restarting a display adapter (_adapter_restart), logging a session off
(_session_logoff), restarting the Explorer shell (_explorer_restart) and shutting WSL down (_wsl_shutdown)."""
