# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter the role gpu_watch reads its webhook settings with: an unanswered AWX survey question (None) is the
role's default, decided here, not in Jinja."""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

# roles/gpu_watch/meta/argument_specs.yml's defaults (tests/unit/plugins/filter/test_watch_filters.py keeps them equal).
DEFAULT_TIMEOUT = 10
DEFAULT_VALIDATE_CERTS = True


def watch_webhook(url, headers=None, timeout=None, validate_certs=None):
    """{"enabled", "url", "headers", "timeout", "validate_certs"}: the webhook request's settings, None meaning the default
    (AWX sends an empty survey answer as None, ansible/awx#16205); enabled when a URL is set."""
    url = "" if url is None else url
    if not isinstance(url, str):
        raise AnsibleFilterError("watch_webhook: gpu_watch_webhook_url must be a URL or empty, got %r" % (url,))
    if headers is not None and not isinstance(headers, Mapping):
        raise AnsibleFilterError("watch_webhook: gpu_watch_webhook_headers must be a mapping, got %r" % (headers,))
    try:
        validate = DEFAULT_VALIDATE_CERTS if validate_certs is None else boolean(validate_certs, strict=True)
    except TypeError:
        raise AnsibleFilterError("watch_webhook: gpu_watch_webhook_validate_certs must be a boolean, got %r" % (validate_certs,)) from None
    return {"enabled": bool(url.strip()), "url": url, "headers": dict(headers or {}),
            "timeout": DEFAULT_TIMEOUT if timeout is None else timeout, "validate_certs": validate}


class FilterModule:
    def filters(self):
        return {"watch_webhook": watch_webhook}
