# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_kmod against real lsmod / modprobe / rmmod output (fixtures/{lsmod,modprobe})."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _kmod

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")


def read(*parts):
    with open(os.path.join(FIXTURES, *parts), encoding="utf-8") as handle:
        return handle.read()


LSMOD_EXPECTED = {
    "four-modules-uvm.txt": {
        "nvidia_uvm": {"size": 9233456, "refcount": 0, "used_by": []},
        "nvidia_drm": {"size": 43213, "refcount": 6, "used_by": []},
        "nvidia_modeset": {"size": 1114112, "refcount": 1, "used_by": ["nvidia_drm"]},
        "nvidia": {"size": 12680704, "refcount": 38, "used_by": ["nvidia_uvm", "nvidia_modeset"]},
    },
    "single-line-nvidia-refcount15.txt": {"nvidia": {"size": 19722240, "refcount": 15, "used_by": []}},
    "ubuntu-2010-drm-i915-hybrid.txt": {
        "nvidia_drm": {"size": 53248, "refcount": 2, "used_by": []},
        "nvidia_modeset": {"size": 1228800, "refcount": 3, "used_by": ["nvidia_drm"]},
        "nvidia": {"size": 34136064, "refcount": 83, "used_by": ["nvidia_modeset"]},
        "drm_kms_helper": {"size": 225280, "refcount": 2, "used_by": ["nvidia_drm", "i915"]},
        "drm": {"size": 565248, "refcount": 17, "used_by": ["drm_kms_helper", "nvidia_drm", "i915"]},
    },
}
PLAN_EXPECTED = {
    "four-modules-uvm.txt": ["nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia"],
    "single-line-nvidia-refcount15.txt": ["nvidia"],
    "ubuntu-2010-drm-i915-hybrid.txt": ["nvidia_drm", "nvidia_modeset", "nvidia"],
}


def test_every_lsmod_fixture_has_an_expectation():
    assert sorted(os.listdir(os.path.join(FIXTURES, "lsmod"))) == sorted(LSMOD_EXPECTED)


@pytest.mark.parametrize("name", sorted(LSMOD_EXPECTED))
def test_parse_lsmod(name):
    assert _kmod.parse_lsmod(read("lsmod", name)) == LSMOD_EXPECTED[name]


@pytest.mark.parametrize("name", sorted(LSMOD_EXPECTED))
def test_parse_lsmod_with_header(name):
    assert _kmod.parse_lsmod("Module                  Size  Used by\n" + read("lsmod", name)) == LSMOD_EXPECTED[name]


@pytest.mark.parametrize("name", sorted(PLAN_EXPECTED))
def test_unload_plan(name):
    assert _kmod.unload_plan(_kmod.parse_lsmod(read("lsmod", name))) == PLAN_EXPECTED[name]


def test_unload_plan_puts_foreign_users_first():
    # The lsmod of the hybrid laptop with nvidia also used by nvidia_fs, itself used by a GDS helper.
    text = read("lsmod", "ubuntu-2010-drm-i915-hybrid.txt").replace(
        "83 nvidia_modeset", "83 nvidia_modeset,nvidia_fs") + "nvidia_fs             262144  1 gds_helper\ngds_helper 4096 0\n"
    loaded = _kmod.parse_lsmod(text)
    assert _kmod.unload_plan(loaded) == ["gds_helper", "nvidia_fs", "nvidia_drm", "nvidia_modeset", "nvidia"]


def test_unload_plan_from_the_full_proc_modules():
    # The whole module table of a GPU node with GDRCopy and GPUDirect RDMA: gdrdrv is not an nvidia* module,
    # gdrdrv_helper (made up) uses gdrdrv; modules nvidia itself uses (drm) stay.
    text = ("gdrdrv_helper 16384 0 - Live 0x0000000000000000 (OE)\n"
            "gdrdrv 24576 1 gdrdrv_helper, Live 0x0000000000000000 (OE)\n"
            "nvidia_peermem 16384 0 - Live 0x0000000000000000 (POE)\n"
            "nvidia_drm 53248 0 - Live 0x0000000000000000 (POE)\n"
            "nvidia_uvm 1437696 0 - Live 0x0000000000000000 (POE)\n"
            "nvidia_modeset 1228800 1 nvidia_drm, Live 0x0000000000000000 (POE)\n"
            "nvidia 34136064 4 gdrdrv,nvidia_peermem,nvidia_uvm,nvidia_modeset, Live 0x0000000000000000 (POE)\n"
            "ib_core 434176 1 nvidia_peermem, Live 0x0000000000000000\n"
            "drm 565248 1 nvidia_drm, Live 0x0000000000000000\n")
    plan = _kmod.unload_plan(_kmod.parse_proc_modules(text))
    assert plan == ["gdrdrv_helper", "gdrdrv", "nvidia_peermem", "nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia"]
    # Loaded back the other way round: nvidia first, each user after what it uses.
    assert list(reversed(plan))[-2:] == ["gdrdrv", "gdrdrv_helper"]


def test_unload_plan_nothing_loaded():
    assert _kmod.unload_plan({}) == []
    assert _kmod.unload_plan(_kmod.parse_lsmod("drm 565248 0\n")) == []


def test_parse_proc_modules():
    # /proc/modules lines for the modules of four-modules-uvm.txt (same sizes, refcounts and users).
    text = ("nvidia_uvm 9233456 0 - Live 0x0000000000000000 (POE)\n"
            "nvidia_drm 43213 6 - Live 0x0000000000000000 (POE)\n"
            "nvidia_modeset 1114112 1 nvidia_drm, Live 0x0000000000000000 (POE)\n"
            "nvidia 12680704 38 nvidia_uvm,nvidia_modeset,[permanent], Unloading 0x0000000000000000 (POE)\n")
    modules = _kmod.parse_proc_modules(text)
    expected = LSMOD_EXPECTED["four-modules-uvm.txt"]
    assert {name: {k: v for k, v in info.items() if k != "state"} for name, info in modules.items()} == expected
    assert [info["state"] for info in modules.values()] == ["Live", "Live", "Live", "Unloading"]


def error(reason, module, users, message):
    return {"module": module, "reason": reason, "users": users, "message": message}


MODPROBE_EXPECTED = {
    "modprobe-r-nvidia-drm-in-use-rmmod-f-eagain.txt": [
        error("in_use", "nvidia_drm", [], "modprobe: FATAL: Module nvidia_drm is in use."),
        error("in_use", "nvidia_drm", [], "rmmod: ERROR: ../libkmod/libkmod-module.c:799 kmod_module_remove_module() "
                                          "could not remove 'nvidia_drm': Resource temporarily unavailable"),
        error("in_use", "nvidia_drm", [], "rmmod: ERROR: could not remove module nvidia-drm: Resource temporarily "
                                          "unavailable")],
    "modprobe-r-nvidia-fatal-in-use.txt": [error("in_use", "nvidia", [], "modprobe: FATAL: Module nvidia is in use.")],
    "modprobe-vr-nvidia-uvm-not-loaded.txt": [
        error("not_loaded", "nvidia_uvm", [], "rmmod: ERROR: Module nvidia_uvm is not currently loaded"),
        error("other", "nvidia", [], "modprobe: FATAL: Error running remove command for nvidia")],
    "rmmod-in-use-chain.txt": [
        error("in_use", "nvidia_drm", [], "rmmod: ERROR: Module nvidia_drm is in use"),
        error("in_use", "nvidia_modeset", ["nvidia_drm"], "rmmod: ERROR: Module nvidia_modeset is in use by: nvidia_drm"),
        error("in_use", "nvidia_uvm", [], "rmmod: ERROR: Module nvidia_uvm is in use"),
        error("in_use", "nvidia", ["nvidia_uvm", "nvidia_modeset"],
              "rmmod: ERROR: Module nvidia is in use by: nvidia_uvm nvidia_modeset")],
    "rmmod-loop-dgx-spark.txt": [
        error("in_use", "nvidia_drm", [], "rmmod: ERROR: Module nvidia_drm is in use"),
        error("in_use", "nvidia_modeset", ["nvidia_drm"], "rmmod: ERROR: Module nvidia_modeset is in use by: nvidia_drm"),
        error("in_use", "nvidia", ["nvidia_modeset"], "rmmod: ERROR: Module nvidia is in use by: nvidia_modeset")],
}


def test_every_modprobe_fixture_has_an_expectation():
    assert sorted(os.listdir(os.path.join(FIXTURES, "modprobe"))) == sorted(MODPROBE_EXPECTED)


@pytest.mark.parametrize("name", sorted(MODPROBE_EXPECTED))
def test_parse_modprobe_errors(name):
    assert _kmod.parse_modprobe_errors(read("modprobe", name)) == MODPROBE_EXPECTED[name]


@pytest.mark.parametrize("name", sorted(MODPROBE_EXPECTED))
def test_parse_modprobe_error_is_the_first(name):
    assert _kmod.parse_modprobe_error(read("modprobe", name)) == MODPROBE_EXPECTED[name][0]


@pytest.mark.parametrize("stderr, reason, module", [
    ("rmmod: ERROR: ../libkmod/libkmod-module.c:799 kmod_module_remove_module() could not remove 'nvidia': "
     "Operation not permitted", "permission", "nvidia"),
    ("modprobe: FATAL: Module nvidia not found in directory /lib/modules/6.8.0-45-generic", "not_found", "nvidia"),
    ("rmmod: ERROR: Module nvidia_peermem does not exist in /proc/modules", "not_loaded", "nvidia_peermem"),
    ("modprobe: ERROR: could not insert 'nvidia': No such device", "other", "nvidia"),
])
def test_other_kmod_messages(stderr, reason, module):
    parsed = _kmod.parse_modprobe_error(stderr + "\n")
    assert (parsed["reason"], parsed["module"], parsed["message"]) == (reason, module, stderr)


def test_no_error_text():
    assert _kmod.parse_modprobe_error("") == {"module": None, "reason": "other", "users": [], "message": ""}
    assert _kmod.parse_modprobe_errors("Unload nvidia_uvm...\n") == []


def test_unload_order_constant():
    assert _kmod.NVIDIA_MODULE_UNLOAD_ORDER == ("nvidia_peermem", "nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia")
