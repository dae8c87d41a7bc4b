# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Linux host's walk imports no Windows code: the import closure of every plugin a Linux run loads (the action
plugins, the filters and the modules, Windows ones aside), taken in a fresh interpreter, holds no `windows` package."""

import glob
import json
import os
import subprocess
import sys


PACKAGE = "ansible_collections.gpuops.remediation"
WINDOWS_PLUGINS = ("win_gpu_holders_info", "win_gpu_reset", "win_gpu_sim", "wsl_shutdown")
ACTING_WINDOWS_PLUGINS = ("win_gpu_reset", "win_gpu_sim", "wsl_shutdown")
CLOSURE = """import json, sys
sys.path.insert(0, sys.argv[1])
for name in sys.argv[2:]:
    __import__(name)
print(json.dumps(sorted(name for name in sys.modules if name.startswith("ansible_collections.gpuops."))))
"""


def plugins(collection, kind, windows):
    names = sorted(os.path.basename(path)[:-3] for path in glob.glob(os.path.join(collection, "plugins", kind, "*.py")))
    return ["%s.plugins.%s.%s" % (PACKAGE, kind, name) for name in names if (name in WINDOWS_PLUGINS) == windows]


def imported(root, names):
    """The collection's modules a fresh interpreter (root on its path) holds after importing `names`."""
    completed = subprocess.run([sys.executable, "-c", CLOSURE, root] + list(names),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False, timeout=120)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def windows_modules(modules):
    return [name for name in modules if "windows" in name.split(".")]


def test_the_linux_plugins_import_no_windows_package(collection_root, collections_root):
    linux = [name for kind in ("action", "filter", "modules") for name in plugins(collection_root, kind, False)]
    assert "%s.plugins.action.gpu_ladder" % PACKAGE in linux
    modules = imported(collections_root, linux)
    # The closure is the real one: the walk and the kill path are in it.
    assert "%s.plugins.plugin_utils.ladder._ladder" % PACKAGE in modules
    assert "%s.plugins.module_utils.kill._kill" % PACKAGE in modules
    assert windows_modules(modules) == []


def test_the_walk_alone_imports_no_windows_package(collections_root):
    walk = ["%s.plugins.action.gpu_ladder" % PACKAGE] + ["%s.plugins.modules.%s" % (PACKAGE, name)
                                                         for name in ("gpu_holders_info", "gpu_kill", "gpu_reset")]
    modules = imported(collections_root, walk)
    assert "%s.plugins.plugin_utils.ladder._ladder" % PACKAGE in modules
    assert windows_modules(modules) == []


def test_the_windows_snapshot_plugin_alone_imports_no_windows_package(collections_root):
    # Ansible's linear strategy imports the action plugin of every task it queues, gpu_inspect's Windows snapshot task
    # skipped on a Linux host too: its module imports the Windows code only when it runs.
    modules = imported(collections_root, ["%s.plugins.action.win_gpu_holders_info" % PACKAGE])
    assert "%s.plugins.action.win_gpu_holders_info" % PACKAGE in modules
    assert windows_modules(modules) == []


def test_a_windows_plugin_does_import_the_windows_package(collections_root):
    # The check sees Windows code where it is: a Windows action plugin's closure holds the windows package.
    modules = imported(collections_root, ["%s.plugins.action.%s" % (PACKAGE, name) for name in ACTING_WINDOWS_PLUGINS])
    assert "%s.plugins.plugin_utils.windows" % PACKAGE in modules
    assert "%s.plugins.plugin_utils.windows.rungs._reset_dispatch" % PACKAGE in modules


# The node code the controller has no use for: each of its forks would compile it from source (the collection loader
# keeps no bytecode) to read the options the walk passes through.
NODE_CODE = ("module_utils._snapshot", "module_utils._action", "module_utils._lock", "module_utils.kill._kill",
             "module_utils.probes._procscan", "module_utils.journal._writer")
WALK_OPTIONS = """import json, sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.gpuops.remediation.plugins.action import gpu_ladder
from ansible_collections.gpuops.remediation.plugins.filter.ladder import FilterModule
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_options import WalkOptions, walk_argument_spec
spec = walk_argument_spec()
options = WalkOptions(dict((name, value.get("default")) for name, value in spec.items()))
print(json.dumps({"spec": sorted(spec), "kill_args": sorted(options.kill_args), "filters": sorted(FilterModule().filters()),
                  "modules": sorted(name for name in sys.modules if name.startswith("ansible_collections.gpuops."))}))
"""


def test_the_walk_reads_the_modules_options_without_importing_their_node_code(collections_root):
    completed = subprocess.run([sys.executable, "-c", WALK_OPTIONS, collections_root], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, universal_newlines=True, check=False, timeout=120)
    assert completed.returncode == 0, completed.stderr
    walk = json.loads(completed.stdout)
    # The options are all there: the snapshot's, the lock's and the kill's pass through to the modules.
    assert {"gpus", "probe_timeout", "lock_timeout", "journal_path", "signals", "kill_grace", "protect_units"} <= set(walk["spec"])
    assert "needs_destructive_rung" in walk["filters"] and "signals" in walk["kill_args"]
    assert [name for name in walk["modules"] if name.endswith(NODE_CODE)] == []
