# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A selection text that reads both as a short PCI bus id and as GPU:GI names two things: it is refused, never taken for
the whole GPU (every instance's jobs with it), and an instance id is ASCII digits only."""

from __future__ import annotations

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils._snapshot import UnknownGpu, select_gpus, unknown_gpu_message

# GPU 0 at 01:00.0 (as on most servers), GPU 1 a 7g.80gb whose one GPU instance has id 0: "1:0" is GPU 1's instance 0
# as GPU:GI writes it, and also the short bus id of GPU 0.
GPUS = [{"index": 0, "uuid": "GPU-aaaa", "pci_bus_id": "00000000:01:00.0",
         "gpu_instances": [{"id": 1, "compute_instances": [{"id": 0, "uuid": "MIG-aaaa-1"}]}]},
        {"index": 1, "uuid": "GPU-bbbb", "pci_bus_id": "00000000:41:00.0",
         "gpu_instances": [{"id": 0, "compute_instances": [{"id": 0, "uuid": "MIG-bbbb-0"}]}]}]


def test_a_text_that_is_a_bus_id_and_an_instance_is_refused_naming_both():
    with pytest.raises(UnknownGpu) as caught:
        select_gpus(GPUS, ["1:0"])
    message = unknown_gpu_message(caught.value)
    assert "'1:0'" in message
    assert "00000000:01:00.0" in message and "MIG-bbbb-0" in message, message


def test_the_unambiguous_spellings_still_select():
    assert select_gpus(GPUS, ["0000:01:00.0"]) == [0]
    assert select_gpus(GPUS, ["MIG-bbbb-0"]) == [1]
    assert select_gpus(GPUS, ["GPU-bbbb:0"]) == [1]
    assert select_gpus(GPUS, ["1:0/0"]) == [1]
    # a short bus id that is no instance of the node still names its GPU
    assert select_gpus(GPUS, ["41:00.0"]) == [1]


@pytest.mark.parametrize("key", ["1:\u0660", "0:\u0661", "0:\uff11", "1:0/\u0660"])
def test_an_instance_id_in_other_digits_is_no_instance(key):
    with pytest.raises(UnknownGpu) as caught:
        select_gpus(GPUS, [key])
    assert repr(key) in unknown_gpu_message(caught.value)
