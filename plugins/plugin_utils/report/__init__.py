# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run report and the lines people read: the JSON report built from what every host left in its variables
(_run_report), the same report as one self-contained HTML page (_report_html), and a snapshot's and a holder's
summary lines (_summary)."""
