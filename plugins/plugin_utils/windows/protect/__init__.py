# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who may be ended on a Windows node: the one answer every path that ends a process asks, alone and as a tree
(_who_may_end), and which virtual machine a VM memory process is, the WSL VM or another (_wsl_vm_identity)."""
