# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test scaffolding: send a signal to a pid the test started, without procps (a minimal container has no kill(1)).

    send_signal.py TERM PID
"""
import os
import signal
import sys

os.kill(int(sys.argv[2]), getattr(signal, "SIG" + sys.argv[1]))
