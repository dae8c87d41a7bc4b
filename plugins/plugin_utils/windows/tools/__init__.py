# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers of what the Windows tools print, no I/O: nvidia-smi with the driver model (_nvidia_smi_output), pnputil's
display adapters (_pnputil_adapters), the GPU memory performance counters (_gpu_memory_counters), taskkill's tree
ending (_taskkill_tree), wsl.exe's lists and argv (_wsl_cli), the interactive sessions (_interactive_sessions) and
Win32_Process's processes (_cim_processes)."""
