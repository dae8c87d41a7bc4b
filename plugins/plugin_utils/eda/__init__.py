# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the Event-Driven Ansible side decides, in pure Python without ansible-rulebook: one module per event source
(_kernel_log_source, _snapshot_source, _alert_webhook_source), what the three share (_source_shared: option checks,
the throttle, one host per event, the problem event), what a run an event starts selects - a MIG instance, a GPU or the
node - for every source alike (_event_selection), and the one host a run started by an event may target (_event_target)."""
