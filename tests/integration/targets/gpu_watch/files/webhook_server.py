# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A webhook receiver for the gpu_watch target: listens on 127.0.0.1 (a free port), appends each POST body as one
JSON line to RECORD, answers 200; writes its pid to PORT_FILE.pid and its port to PORT_FILE once listening, and exits after LIFETIME seconds.

    webhook_server.py RECORD PORT_FILE LIFETIME
"""

import http.server
import json
import os
import sys
import threading


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        entry = {"path": self.path, "content_type": self.headers.get("Content-Type"), "body": json.loads(body.decode("utf-8"))}
        with open(self.server.record, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def main(record, port_file, lifetime):
    server = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    server.record = record
    threading.Timer(float(lifetime), server.shutdown).start()
    with open(port_file + ".pid", "w", encoding="utf-8") as handle:
        handle.write(str(os.getpid()))
    with open(port_file + ".tmp", "w", encoding="utf-8") as handle:
        handle.write(str(server.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    main(*sys.argv[1:4])
