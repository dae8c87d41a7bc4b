# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""AWX's extra variables, read by this ansible-core's own loader, are the same plain data for the action plugins on
every supported ansible-core (tools/core_lanes.py runs this file on 2.16 and 2.18 as well as on the pinned 2.19)."""

from ansible.parsing.dataloader import DataLoader
from ansible.release import __version__ as core_version

from ansible_collections.gpuops.remediation.plugins.plugin_utils._data import plain

AWX_EXTRAVARS = """\
!unsafe 'gpu_watch_webhook_url': !unsafe ''
!unsafe 'gpuops_hosts': !unsafe 'gpu_nodes'
!unsafe 'gpu_reclaim_protect_names': [!unsafe 'sshd', !unsafe '']
!unsafe 'gpu_watch_samples': 3
"""


def test_awx_answers_are_the_same_plain_data_on_every_core():
    loaded = DataLoader().load(AWX_EXTRAVARS)
    data = plain(loaded)
    assert data == {"gpu_watch_webhook_url": None, "gpuops_hosts": "gpu_nodes", "gpu_reclaim_protect_names": ["sshd", None],
                    "gpu_watch_samples": 3}, core_version
    assert data["gpuops_hosts"].__class__ is str and all(key.__class__ is str for key in data)  # str itself, no subclass


def test_a_plain_empty_string_stays_empty():
    """Only the !unsafe empty answer is no answer: an empty string the playbook itself sets stays one."""
    assert plain(DataLoader().load("name: ''")) == {"name": ""}
    assert plain({"name": ""}) == {"name": ""}
