# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The event sources' number options: a value that is not finite is refused, naming the option."""

import pytest

from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import OptionError
from ansible_collections.gpuops.remediation.tests.unit.helpers.eda_sources import _source


@pytest.mark.parametrize("name, option", [("gpu_kernel_log", "poll_interval"), ("gpu_kernel_log", "throttle_seconds"),
                                          ("gpu_snapshot", "duration_seconds"), ("gpu_snapshot", "poll_interval")])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_number_option_that_is_not_finite_is_named(name, option, value):
    """YAML's .nan passed every minimum (nan < min is false): poll_interval .nan made asyncio.sleep return at once, a
    source spinning on a core; duration_seconds .nan made every condition last; throttle_seconds .nan throttled none."""
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import check_args

    with pytest.raises(OptionError, match=r"^%s: option %s must be a float, got %r$" % (name, option, value)):
        check_args(name, {option: value}, _source(name).SPEC)


def test_an_empty_nodes_list_watches_no_node_and_says_so():
    """An empty selection selects nothing: nodes: [] (what a filter that matched nothing gives) is no node to watch,
    never the source's own host; only the option left out (or null) means the one node of host and state_path."""
    import asyncio

    source = _source("gpu_snapshot")
    with pytest.raises(OptionError, match=r"^gpu_snapshot: option nodes is an empty list: it names no node to watch "):
        asyncio.run(asyncio.wait_for(source.main(asyncio.Queue(), {"nodes": [], "host": "node07"}), 10))


def test_an_empty_paths_mapping_follows_no_file_and_says_so():
    import asyncio

    source = _source("gpu_kernel_log")
    with pytest.raises(OptionError, match=r"^gpu_kernel_log: option paths is an empty mapping: it names no host's file to follow "):
        asyncio.run(asyncio.wait_for(source.main(asyncio.Queue(), {"paths": {}, "source": "file", "path": "/dev/null", "host": "node07"}), 10))
