# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""WSL distribution names: every name WSL accepts (^[a-zA-Z0-9._-]+$) is listed and stopped, in check mode as for
real; one that passes for an option never reaches wsl.exe's argv."""

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node


@pytest.mark.parametrize("bom", [True, False])
@pytest.mark.parametrize("name", ["_work", ".scratch", "9.x_-"])
def test_a_distribution_whose_name_starts_with_a_dot_or_underscore_is_listed_and_stopped(tmp_path, bom, name):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _wsl_shutdown
    from .test_win_wsl_rung import build as wsl_build, running, target
    scenario = {"distributions": [{"name": name, "memory_mib": 1024}, {"name": "Ubuntu", "memory_mib": 0}]}
    check_root = wsl_build(tmp_path / "check", **scenario).root
    predicted = _wsl_shutdown.stop(target(check_root, bom=bom), None, True, gpu_holders=True)
    root = wsl_build(tmp_path / "real", **scenario).root
    done = _wsl_shutdown.stop(target(root, bom=bom), None, False, gpu_holders=True)
    # was: "not a list of distribution names", the rung failed on the whole host
    assert not done.get("failed"), done.get("msg")
    for key in ("changed", "stopped", "commands", "running_after"):
        assert predicted[key] == done[key], key
    assert done["stopped"] == [name] and running(root) == ["Ubuntu"] and sorted(running(check_root)) == sorted([name, "Ubuntu"])
    direct = _wsl_shutdown.stop(target(wsl_build(tmp_path / "direct", **scenario).root), name, False)
    assert direct["stopped"] == [name] and direct["commands"][0][-2:] == ["--terminate", name]


@pytest.mark.parametrize("name", ["-u", "--shutdown", "-x.y"])
def test_a_name_that_passes_for_an_option_is_refused_naming_the_option(tmp_path, name):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _wsl_shutdown
    from .test_win_wsl_rung import build as wsl_build
    node = wsl_build(tmp_path, distributions=[{"name": "Ubuntu", "memory_mib": 1024}])
    with pytest.raises(ValueError, match="^distribution: not a WSL distribution name"):
        _wsl_shutdown.stop(node, name, False)
    assert _simulated_node.snapshot_of_state(node.root)["command_log"] == []
