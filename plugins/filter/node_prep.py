# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter the role gpu_node_prep builds PyTorch's allocator defaults with: checked here, not in Jinja."""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

# PyTorch's CUDA caching allocator (c10/cuda/CUDAAllocatorConfig.cpp): what each key accepts, in the order written.
ALLOCATOR_BACKENDS = ("native", "cudaMallocAsync")
# The allocator refuses a split size at or below its large-buffer size of 20 MiB.
MIN_SPLIT_SIZE_MB = 21


def _bool(key, value):
    if not isinstance(value, bool):
        raise AnsibleFilterError("pytorch_alloc_conf: %s must be true or false, got %r" % (key, value))
    return "True" if value else "False"


def _split_size(key, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_SPLIT_SIZE_MB:
        raise AnsibleFilterError("pytorch_alloc_conf: %s must be a whole number of MiB above 20, got %r" % (key, value))
    return str(value)


def _threshold(key, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 1.0:
        raise AnsibleFilterError("pytorch_alloc_conf: %s must be a fraction between 0 and 1 (exclusive), got %r" % (key, value))
    return repr(float(value))


def _backend(key, value):
    if value not in ALLOCATOR_BACKENDS:
        raise AnsibleFilterError("pytorch_alloc_conf: %s must be one of %s, got %r" % (key, ", ".join(ALLOCATOR_BACKENDS), value))
    return value


ALLOCATOR_KEYS = {
    "backend": _backend,
    "expandable_segments": _bool,
    "max_split_size_mb": _split_size,
    "garbage_collection_threshold": _threshold,
}


def pytorch_alloc_conf(settings):
    """'key:value,...' for PYTORCH_CUDA_ALLOC_CONF from a mapping of the keys above; '' for an empty or null one."""
    if not settings:
        return ""
    if not isinstance(settings, Mapping):
        raise AnsibleFilterError("pytorch_alloc_conf: the input must be a mapping of allocator settings, got %r" % (settings,))
    unknown = sorted(str(key) for key in settings if key not in ALLOCATOR_KEYS)
    if unknown:
        raise AnsibleFilterError("pytorch_alloc_conf: %s is not a setting this role writes (%s)"
                                 % (", ".join(map(repr, unknown)), ", ".join(ALLOCATOR_KEYS)))
    return ",".join("%s:%s" % (key, check(key, settings[key])) for key, check in ALLOCATOR_KEYS.items()
                    if key in settings and settings[key] is not None)


def nvml_pip_argv(venv_python, version, find_links=None, index_url=None):
    """The pip command that installs nvidia-ml-py==version with the virtual environment's interpreter: from the wheels
    in find_links alone (--no-index) when there are any, from index_url when set, else from pip's default index."""
    if not isinstance(version, str) or not version.strip():
        raise AnsibleFilterError("nvml_pip_argv: gpu_node_prep_nvml_version must be a version, got %r" % (version,))
    if find_links is not None and (isinstance(find_links, (str, bytes, Mapping)) or not all(isinstance(item, str) for item in find_links)):
        raise AnsibleFilterError("nvml_pip_argv: gpu_node_prep_pip_find_links must be a list of directories or URLs, got %r"
                                 % (find_links,))
    argv = [venv_python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "nvidia-ml-py==" + version]
    if find_links:
        argv += ["--no-index"] + ["--find-links=" + link for link in find_links]
    if index_url:
        argv.append("--index-url=" + index_url)
    return argv


class FilterModule:
    def filters(self):
        return {"pytorch_alloc_conf": pytorch_alloc_conf, "nvml_pip_argv": nvml_pip_argv}
