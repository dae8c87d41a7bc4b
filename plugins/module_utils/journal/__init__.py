# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node's action journal: one JSON line per intent before each action and per outcome after it, each written with
one append and fsync'd (_writer), read back (_reader) as the evidence of what a run did (_evidence); where its files
are kept, rotated and locked (_files)."""
