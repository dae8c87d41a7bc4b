# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scheduler as the ladder needs it: Slurm's view of a node, its drain and resume and its jobs (_slurm), and whether
a holder belongs to a live job on this node, as the scheduler says (_jobs), so that a working job's process counts as
busy, not stuck."""
