# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The walk up the ladder on the controller, for every platform: the walk itself (_ladder), its decisions one pure
function each (_ladder_decisions), its options and the platforms' values (_ladder_options), what a walk did for
people and the report (_ladder_outcome), and which ladder a host walks (_host_platform)."""
