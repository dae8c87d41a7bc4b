# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers the unit tests share: bounded waits on helper processes, captured answers, simulated nodes to walk."""
