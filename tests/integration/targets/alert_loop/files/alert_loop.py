# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The whole alert loop for real, on one simulated node, each daemon on a 127.0.0.1 port of its own:

    gpu_watch.yml -> gpuops.prom -> prometheus-node-exporter (textfile) -> prometheus (gpuops.rules.yml)
      -> prometheus-alertmanager (webhook_config, http_config bearer token) -> gpu_alert_webhook
      -> ansible-rulebook (the shipped rules) -> reset_gpu.yml on that node and GPU
      -> gpu_watch.yml again -> the next scrape shows the memory back -> the alert resolves

    alert_loop.py --workdir DIR --result FILE --collection ROOT --collections-path DIR [--storm N]

Every daemon runs in a session of its own, its output in DIR/logs, and is stopped by its pid (SIGTERM to its group,
SIGKILL past a bound) however the loop ends. Every wait has a deadline and fails naming what it waited for. The
result (JSON) has the facts the caller asserts and the times of each part: scrape, rule evaluation, Alertmanager's
grouping and delivery, the run, and the way back (watch, scrape, resolution). With --storm N, N alerts for N other
hosts are posted at once while the rulebook works, and each answer's latency is recorded.
"""

from __future__ import annotations

import base64
import calendar
import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

DEADLINE = 180.0
STEP = 0.05
COLLECTION = None  # the collection root, from --collection
COLLECTIONS_PATH = None  # the directory holding ansible_collections/gpuops/remediation, from --collections-path


class LoopError(RuntimeError):
    """A step of the loop did not happen; the message names it (and the daemon's log to read)."""


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def until(what, check, seconds=DEADLINE):
    """check() until it returns something true; its value, or LoopError naming `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise LoopError("waited %d s for %s" % (seconds, what))
        time.sleep(STEP)


def get_json(url, timeout=5):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return json.load(answer)
    except (OSError, ValueError):
        return None


def query(prometheus, expression):
    """The vector an instant query returns now ([] on no answer)."""
    answer = get_json("http://%s/api/v1/query?%s" % (prometheus, urllib.parse.urlencode({"query": expression})))
    return (answer or {}).get("data", {}).get("result", []) if (answer or {}).get("status") == "success" else []


class Daemons:
    """The daemons this loop started, each the leader of a session of its own; stop() ends each by its pid."""

    def __init__(self, logs):
        self.logs = logs
        self.started = []

    def start(self, name, argv, env=None):
        log = os.path.join(self.logs, name + ".log")
        with open(log, "wb") as output:
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,  # pylint: disable=consider-using-with
                                       start_new_session=True, env=env)
        self.started.append((name, process))
        return log

    def alive(self, name):
        for started, process in self.started:
            if started == name and process.poll() is not None:
                raise LoopError("%s exited %s; its log: %s" % (name, process.returncode, os.path.join(self.logs, name + ".log")))
        return True

    def stop(self):
        """SIGTERM to each group (last started first), SIGKILL to a group still there 15 s later."""
        for _name, process in reversed(self.started):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for _name, process in reversed(self.started):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:  # still unreaped: its pid, and so its group, is still its own
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=15)
        self.started = []


def write(path, text, mode=0o600):
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "w") as handle:
        handle.write(text)
    return path


def configs(work, ports, token_file):
    """The Prometheus, Alertmanager and rulebook configuration of the loop (what docs/eda.md shows), 1 s intervals."""
    prometheus = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [os.path.join(COLLECTION, "extensions", "prometheus", "gpuops.rules.yml")],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": ["127.0.0.1:%d" % ports["alertmanager"]]}]}]},
        # The instance label is the inventory name (the webhook drops a port): node_exporter's address is not.
        "scrape_configs": [{"job_name": "gpu_nodes", "static_configs": [
            {"targets": ["127.0.0.1:%d" % ports["node_exporter"]], "labels": {"instance": "gpunode1:9100"}}]}],
    }
    alertmanager = {
        "route": {"receiver": "gpuops", "group_by": ["alertname", "instance", "pci_bus_id"],
                  "group_wait": "1s", "group_interval": "1s", "repeat_interval": "1h"},
        "receivers": [{"name": "gpuops", "webhook_configs": [{
            "url": "http://127.0.0.1:%d/alerts" % ports["webhook"], "send_resolved": True,
            "http_config": {"authorization": {"type": "Bearer", "credentials_file": token_file}}}]}],
    }
    with open(os.path.join(COLLECTION, "extensions", "eda", "rulebooks", "gpu_remediation.yml")) as handle:
        shipped = yaml.safe_load(handle)[0]
    shipped["sources"] = [{"name": "Alertmanager", "gpuops.remediation.gpu_alert_webhook": {
        "port": ports["webhook"], "auth": "bearer", "secret_env": "GPUOPS_WEBHOOK_TOKEN",
        "inventory": os.path.join(work, "inventory.yml")}}]
    return {"prometheus.yml": yaml.safe_dump(prometheus), "alertmanager.yml": yaml.safe_dump(alertmanager),
            "rulebook.yml": yaml.safe_dump([shipped], sort_keys=False)}


def inventory(work, root, storm):
    hosts = {"gpunode1": {"gpuops_environment": {"GPUOPS_SIM_ROOT": root}}}
    for number in range(storm):  # hosts whose node is gone: their runs fail fast on the node, a run all the same
        hosts["storm%03d" % number] = {"gpuops_environment": {"GPUOPS_SIM_ROOT": os.path.join(work, "gone")}}
    return yaml.safe_dump({"gpu_nodes": {"hosts": hosts, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "gpu_remediate_report_dir": os.path.join(work, "reports"), "gpu_reclaim_allow_reboot": False,
        "gpu_reclaim_health_check": "never", "gpu_remediate_max_destructive_percent": 100}}})


def ansible_env(work):
    bin_dir = os.path.dirname(sys.executable)
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_LOCAL_TEMP=os.path.join(work, "ansible-local"),
               ANSIBLE_COLLECTIONS_PATH=COLLECTIONS_PATH)
    env.pop("GPUOPS_SIM_ROOT", None)
    return env


def watch(work, env):
    """playbooks/gpu_watch.yml on the node, three samples at once (the ghost streak's length): the metrics written."""
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", os.path.join(work, "inventory.yml"),
            os.path.join(COLLECTION, "playbooks", "gpu_watch.yml"), "-l", "gpunode1",
            "-e", "gpu_watch_samples=3", "-e", "gpu_watch_interval=0", "-e", "gpu_watch_ghost_samples=3"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=DEADLINE, check=False)
    if done.returncode != 0:
        raise LoopError("gpu_watch.yml failed (%d): %s" % (done.returncode, done.stdout[-3000:]))
    return time.time()


def reports(work):
    folder = os.path.join(work, "reports")
    names = sorted(name for name in os.listdir(folder) if name.endswith(".json") and name != "latest.json") if os.path.isdir(folder) else []
    found = []
    for name in names:
        with open(os.path.join(folder, name)) as handle:
            found.append((os.stat(os.path.join(folder, name)).st_mtime, json.load(handle)))
    return found


def firing(prometheus, name):
    answer = get_json("http://%s/api/v1/alerts" % prometheus) or {}
    return [alert for alert in answer.get("data", {}).get("alerts", []) if alert["labels"].get("alertname") == name]


def first_sample(prometheus, selector, wanted):
    """The time of the first raw sample of the last 10 minutes whose value is wanted(value), or None."""
    found = [float(stamp) for series in query(prometheus, selector + "[10m]") for stamp, value in series.get("values", [])
             if wanted(float(value))]
    return min(found) if found else None


def dashboard_series(prometheus, start, end):
    """{panel title: the number of series its query returns} for every panel of extensions/grafana's dashboard, over
    the loop's time, with $instance as Grafana's "All" sends it (the variable's allValue)."""
    with open(os.path.join(COLLECTION, "extensions", "grafana", "gpuops-dashboard.json")) as handle:
        dashboard = json.load(handle)
    all_value = [variable for variable in dashboard["templating"]["list"] if variable["name"] == "instance"][0]["allValue"]
    counts = {}
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expression = target["expr"].replace("$instance", all_value)
            answer = get_json("http://%s/api/v1/query_range?%s" % (prometheus, urllib.parse.urlencode(
                {"query": expression, "start": start, "end": end, "step": 1}))) or {}
            counts[panel["title"]] = len(answer.get("data", {}).get("result", [])) if answer.get("status") == "success" else None
    return counts


def rfc3339(text):
    """Prometheus's activeAt ("2026-12-06T07:40:01.123456789Z") as epoch seconds."""
    stamp, _dot, fraction = text.rstrip("Z").partition(".")
    whole = calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))
    return whole + float("0." + (fraction or "0"))


def post_storm(ports, token, count):
    """count alerts for count hosts, posted at once as Alertmanager would (one request each); each answer's seconds."""
    def post(number):
        body = json.dumps({"alerts": [{"status": "firing", "labels": {
            "alertname": "GpuopsGhostMemory", "instance": "storm%03d:9100" % number, "pci_bus_id": "00000000:18:00.0"}}]}).encode()
        request = urllib.request.Request("http://127.0.0.1:%d/alerts" % ports["webhook"], data=body, method="POST",
                                         headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                code = answer.status
        except urllib.error.HTTPError as exc:
            code = exc.code
        except OSError:
            code = None
        return code, time.monotonic() - started

    with concurrent.futures.ThreadPoolExecutor(max_workers=min(count, 16)) as pool:
        return list(pool.map(post, range(count)))


def run_loop(work, storm=0, concurrent_actions=4):
    """The loop on a fresh node under `work`; returns the result (facts and times)."""
    sys.path.insert(0, COLLECTIONS_PATH)
    from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build  # pylint: disable=import-outside-toplevel

    for sub in ("logs", "reports", "ansible-local", "prometheus-data", "alertmanager-data"):
        os.makedirs(os.path.join(work, sub))
    root = os.path.join(work, "gpunode1")
    # Ghost memory on GPU 0 (the reset gives it back); an Xid 13 on GPU 1 (its catalog action asks for no rung) so
    # that the dashboard's Xid panel has a series.
    _sim_build.create_node(root, {"gpus": [{"ghost_mib": 2048}, {}], "xid": [{"xid": 13, "gpu": 1}]})
    ports = {name: free_port() for name in ("node_exporter", "prometheus", "alertmanager", "webhook")}
    token = base64.b32encode(os.urandom(20)).decode()
    token_file = write(os.path.join(work, "webhook.token"), token)
    for name, text in configs(work, ports, token_file).items():
        write(os.path.join(work, name), text)
    write(os.path.join(work, "inventory.yml"), inventory(work, root, storm))
    env = ansible_env(work)
    daemons = Daemons(os.path.join(work, "logs"))
    prometheus = "127.0.0.1:%d" % ports["prometheus"]
    textfile_dir = os.path.join(root, "var", "lib", "node_exporter", "textfile_collector")
    result = {"ports": ports, "work": work}
    try:
        os.makedirs(textfile_dir, exist_ok=True)
        daemons.start("node_exporter", ["prometheus-node-exporter", "--web.listen-address=127.0.0.1:%d" % ports["node_exporter"],
                                        "--collector.disable-defaults", "--collector.textfile",
                                        "--collector.textfile.directory=" + textfile_dir])
        daemons.start("alertmanager", ["prometheus-alertmanager", "--config.file=" + os.path.join(work, "alertmanager.yml"),
                                       "--storage.path=" + os.path.join(work, "alertmanager-data"),
                                       "--web.listen-address=127.0.0.1:%d" % ports["alertmanager"], "--cluster.listen-address="])
        daemons.start("prometheus", ["prometheus", "--config.file=" + os.path.join(work, "prometheus.yml"),
                                     "--storage.tsdb.path=" + os.path.join(work, "prometheus-data"),
                                     "--web.listen-address=" + prometheus])
        rulebook_log = daemons.start("ansible-rulebook", [
            os.path.join(os.path.dirname(sys.executable), "ansible-rulebook"), "-v", "-i", os.path.join(work, "inventory.yml"),
            "-r", os.path.join(work, "rulebook.yml"), "--max-concurrent-actions", str(concurrent_actions)],
            env=dict(env, GPUOPS_WEBHOOK_TOKEN=token))
        until("node_exporter, Prometheus and Alertmanager to answer", lambda: all(
            daemons.alive(name) for name in ("node_exporter", "prometheus", "alertmanager")) and _answers(
            "http://%s/-/ready" % prometheus) and _answers("http://127.0.0.1:%d/-/ready" % ports["alertmanager"]))
        until("ansible-rulebook's webhook to listen (%s)" % rulebook_log, lambda: daemons.alive("ansible-rulebook") and _listens(ports["webhook"]))
        until("Prometheus to scrape node_exporter", lambda: query(prometheus, 'up{job="gpu_nodes"} == 1'))

        # The watch finds the ghost memory and writes it; each step after is dated where it happens (Prometheus's
        # samples, its activeAt, the webhook's log line, the report's file).
        metrics = os.path.join(textfile_dir, "gpuops.prom")
        watch(work, env)
        result["metrics_written"] = os.stat(metrics).st_mtime
        result["first_scrape"] = until("the ghost memory finding in Prometheus (a scrape)", lambda: first_sample(
            prometheus, 'gpuops_gpu_finding{kind="ghost_memory"}', lambda value: value == 1))
        alerts = until("GpuopsGhostMemory to fire", lambda: [
            alert for alert in firing(prometheus, "GpuopsGhostMemory") if alert["state"] == "firing"])
        result["alert"] = alerts[0]["labels"]
        result["firing"] = rfc3339(alerts[0]["activeAt"])
        done = until("the run of reset_gpu.yml for the alert (its report; %s)" % rulebook_log,
                     lambda: [report for report in reports(work) if report[1]["hosts"][0]["host"] == "gpunode1"])
        result["fixed"], report = done[0]
        result["report"] = report["hosts"][0]
        result["webhook_received"] = _stamps(rulebook_log, "gpu_alert_webhook: accepted 1 events")[0]

        # The way back: the watch's next run, the next scrape shows the memory back, the alert resolves.
        watch(work, env)
        result["rewatch_written"] = os.stat(metrics).st_mtime
        result["memory_back_scraped"] = until("a scrape to show GPU 0's ghost memory gone", lambda: first_sample(
            prometheus, 'gpuops_gpu_memory_ghost_bytes{instance="gpunode1:9100",gpu="0"}', lambda value: value == 0))
        until("GpuopsGhostMemory to resolve in Prometheus", lambda: not firing(prometheus, "GpuopsGhostMemory"))
        # Alertmanager's resolved notification: the webhook takes it and makes no event.
        result["resolved_delivered"] = until("Alertmanager's resolved notification (%s)" % rulebook_log, lambda: [
            stamp for stamp in _stamps(rulebook_log, "gpu_alert_webhook: accepted 0 events") if stamp > result["fixed"] - 1])[0]
        result["finding_after"] = query(prometheus, 'gpuops_gpu_finding{kind="ghost_memory"}')
        # Each panel over the loop's time; the last scrape may be newer than the range's last step: asked again (bounded)
        # until every panel has series, and what they have then is the result the caller asserts.
        deadline = time.monotonic() + 30
        while True:
            result["dashboard"] = dashboard_series(prometheus, result["metrics_written"] - 2, time.time())
            if all(result["dashboard"].values()) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        result["ghost_bytes_after"] = [float(sample["value"][1]) for sample in query(prometheus, "gpuops_gpu_memory_ghost_bytes")]
        if storm:
            result["storm"] = post_storm(ports, token, storm)
            until("the storm's runs to end (%s)" % rulebook_log, lambda: _count(rulebook_log, "PLAY RECAP") >= 1 + storm, 600)
        result["reports"] = len(reports(work))
        result["rulebook_rejections"] = _count(rulebook_log, "gpu_alert_webhook: rejected")
        result["alertmanager_notify_errors"] = _count(os.path.join(work, "logs", "alertmanager.log"), "Notify for alerts failed")
        return result
    finally:
        daemons.stop()
        _sim_build.destroy_node(root)


def _answers(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status == 200
    except OSError:
        return False


def _listens(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _lines(log, words):
    with open(log, errors="replace") as handle:
        return [line for line in handle if words in line]


def _count(log, words):
    return len(_lines(log, words))


def _stamp(line):
    """The epoch of ansible-rulebook's log line ("2026-12-06 07:40:01,123 - ...")."""
    text = line[:23]
    try:
        return time.mktime(time.strptime(text[:19], "%Y-%m-%d %H:%M:%S")) + int(text[20:23]) / 1000.0
    except ValueError:
        return None


def _stamps(log, words):
    return [stamp for stamp in (_stamp(line) for line in _lines(log, words)) if stamp is not None]


def parts(result):
    """The loop's times, in seconds, from the facts of run_loop."""
    got = {
        "scrape": result["first_scrape"] - result["metrics_written"],
        "rule_evaluation": result["firing"] - result["first_scrape"],
        "alertmanager_to_webhook": result["webhook_received"] - result["firing"],
        "rulebook_and_run": result["fixed"] - result["webhook_received"],
        "ladder_walk": result["report"]["seconds"],
        "alert_to_fixed": result["fixed"] - result["firing"],
        "metrics_to_fixed": result["fixed"] - result["metrics_written"],
        "rewatch_to_scraped": result["memory_back_scraped"] - result["rewatch_written"],
        "scraped_to_resolved_delivered": result["resolved_delivered"] - result["memory_back_scraped"],
    }
    if result.get("storm"):
        latencies = sorted(seconds for _code, seconds in result["storm"])
        got["storm_webhook_max"] = latencies[-1]
        got["storm_webhook_median"] = latencies[len(latencies) // 2]
    return dict((name, round(value, 3)) for name, value in got.items())


def _interrupted(signum, _frame):
    raise LoopError("interrupted by signal %d" % signum)


def main(argv):
    global COLLECTION, COLLECTIONS_PATH  # pylint: disable=global-statement
    import argparse  # pylint: disable=import-outside-toplevel

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--result", required=True)
    parser.add_argument("--collection", required=True, help="the collection root (ansible_collections/gpuops/remediation)")
    parser.add_argument("--collections-path", required=True, help="the directory holding ansible_collections/")
    parser.add_argument("--storm", type=int, default=0)
    args = parser.parse_args(argv)
    COLLECTION, COLLECTIONS_PATH = os.path.abspath(args.collection), os.path.abspath(args.collections_path)
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):  # the daemons and the node are stopped however it ends
        signal.signal(signum, _interrupted)
    try:
        result = run_loop(os.path.abspath(args.workdir), args.storm)
        result["parts"] = parts(result)
        result["ok"] = True
    except LoopError as exc:
        result = {"ok": False, "error": str(exc)}
    with open(args.result, "w") as handle:
        json.dump(result, handle, indent=1, default=str)
    print(json.dumps(result.get("parts") or result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
