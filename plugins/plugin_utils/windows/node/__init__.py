# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Windows node an action plugin talks to and how: the one switch between a real host (ansible.windows' win_command
and win_powershell) and the simulated one (_remote_node), the named PowerShell scripts and the literals that carry
values into them (_powershell_scripts, _powershell_literals), reading ConvertTo-Json's output and decoding a tool's
bytes (_convertto_json, _output_encoding), and the journal written on the node (_node_journal)."""
