# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watch (module gpu_watch): samples of a node judged against its state file so that a condition can last longer
than one run (_watch), its metrics in the Prometheus text format for node_exporter's textfile collector
(_watch_metrics), and the table of the numbers its argument spec cannot bound (_watch_ranges)."""
