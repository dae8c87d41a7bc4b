# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ending processes on a Linux node: the one kill path that picks holders and ends each kind the way it must be ended
(_kill); who may be signalled and what each protect entry means (_protect, _protect_entries); what a signal will do,
predicted from the kernel's signal state (_signal_state); signals sent to a process still the one detected, and the
wait for its exit (_terminate); frozen cgroups thawed (_freezer); zombies reaped through their parent (_zombies); and
containers stopped through the runtime their cgroup names, once the runtime confirms the process is theirs
(_containers, _container_runtime)."""
