# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A syslog socket served as rsyslogd serves /dev/log, for lines a real second account logs with util-linux's real
`logger` (through runuser); it lives in a directory the second account can reach (the `staged` fixture)."""

import os
import socket
import subprocess
import threading
import time


class SyslogSocket:
    """A syslog socket served as rsyslogd serves /dev/log: each datagram's "<pri>" dropped, the rest (time, host, the tag
    and the message as the client sent them) written one line each to a file root owns."""

    def __init__(self, directory, log):
        self.path = os.path.join(directory, "log")
        self.log = log
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        os.chmod(self.path, 0o666)  # as /dev/log: every user may log
        self.received = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                return
            text = data.decode("utf-8", "replace")
            rest = text.split(">", 1)[1] if text.startswith("<") else text
            # RFC 3164 from logger: "Mmm dd hh:mm:ss host tag: message", written as it came.
            with open(self.log, "a", encoding="utf-8") as handle:
                handle.write(rest.rstrip("\n") + "\n")
            self.received.append(rest[16:].split(" ", 1)[1])

    def log_as(self, user, *args):
        argv = ["runuser", "-u", user, "--", "logger", "--rfc3164", "-u", self.path] + list(args)
        before = len(self.received)
        subprocess.run(argv, check=True, timeout=30)
        deadline = time.monotonic() + 30
        while len(self.received) == before:
            assert time.monotonic() < deadline, "the syslog socket got no line from %r" % (argv,)
            time.sleep(0.01)
        return self.received[-1]

    def close(self):
        self.sock.close()
