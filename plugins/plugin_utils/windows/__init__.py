# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Everything the controller does for a Windows GPU node, imported only when a host is Windows: the Windows walk over
the shared one (_windows_walk) and the node's snapshot (_node_snapshot), with the node and its transport (node), the
parsers of the Windows tools' output (tools), the rungs that act on the node (rungs), who may be ended (protect) and
the simulated Windows node (simulation)."""
