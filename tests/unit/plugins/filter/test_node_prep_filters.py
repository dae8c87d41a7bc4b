# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The allocator defaults the role gpu_node_prep writes (plugins/filter/node_prep.py)."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.remediation.plugins.filter.node_prep import FilterModule

CONF = FilterModule().filters()["pytorch_alloc_conf"]


def test_settings_are_written_in_pytorchs_spelling_in_a_fixed_order():
    assert CONF({"expandable_segments": True}) == "expandable_segments:True"
    assert CONF({"max_split_size_mb": 512, "expandable_segments": False, "garbage_collection_threshold": 0.8}) == (
        "expandable_segments:False,max_split_size_mb:512,garbage_collection_threshold:0.8")
    assert CONF({"backend": "cudaMallocAsync", "max_split_size_mb": None}) == "backend:cudaMallocAsync"


@pytest.mark.parametrize("settings", [None, {}])
def test_nothing_asked_is_an_empty_value(settings):
    assert CONF(settings) == ""


@pytest.mark.parametrize("settings, says", [
    ({"max_split_size_mb": 20}, "max_split_size_mb must be a whole number of MiB above 20, got 20"),
    ({"max_split_size_mb": "512"}, "got '512'"),
    ({"max_split_size_mb": True}, "got True"),
    ({"expandable_segments": "yes"}, "expandable_segments must be true or false, got 'yes'"),
    ({"garbage_collection_threshold": 1.0}, "between 0 and 1 (exclusive), got 1.0"),
    ({"backend": "malloc"}, "backend must be one of native, cudaMallocAsync, got 'malloc'"),
    ({"expandable_segment": True}, "'expandable_segment' is not a setting this role writes"),
    ("expandable_segments:True", "the input must be a mapping"),
])
def test_what_pytorch_would_refuse_is_refused_naming_the_key_and_value(settings, says):
    with pytest.raises(AnsibleFilterError, match=None) as caught:
        CONF(settings)
    assert says in str(caught.value)
