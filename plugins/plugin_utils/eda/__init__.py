# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the Event-Driven Ansible side shares: the event sources' option checks, throttle, event shape and closed loop,
in pure Python without ansible-rulebook (_eda_sources), and the one host a run started by an event may target
(_event_target)."""
