# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading what PowerShell's ConvertTo-Json wrote: one object or a list of them, numbers, and dates."""

from __future__ import annotations

import datetime
import json
import re

# Windows PowerShell 5.1 writes a DateTime as "\/Date(<ms since 1970>)\/", with an offset "+0200" for local kinds.
_MS_DATE_RE = re.compile(r"^/Date\((-?\d+)(?:[+-]\d{4})?\)/$")
# PowerShell 7 writes ISO 8601 with up to 7 fractional digits; CIM's own DMTF form: yyyymmddHHMMSS.ffffff+UUU.
_ISO_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})?$")
_DMTF_RE = re.compile(r"^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})\.(\d{6})([+-]\d{3})$")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
# 100 ns intervals between 1601-01-01 (FILETIME's epoch) and 1970-01-01.
_FILETIME_EPOCH_OFFSET = 116444736000000000


def objects(text):
    """ConvertTo-Json output -> a list of dicts (PowerShell writes a single object without the list, and nothing
    at all, `null` or `[null]` for an empty pipeline). ValueError when it is not JSON objects."""
    if isinstance(text, bytes):
        text = text.decode("utf-8-sig")
    text = text.strip()
    if not text:
        return []
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError("not ConvertTo-Json output: %s" % exc) from exc
    # Windows PowerShell 5.1 writes an empty pipeline collected with @(...) as [null] (and a lone $null as null).
    items = [item for item in (value if isinstance(value, list) else [value]) if item is not None]
    if not all(isinstance(item, dict) for item in items):
        raise ValueError("ConvertTo-Json output holds something other than objects: %r" % text[:200])
    return items


def integer(value):
    """A JSON number or numeric string (CIM writes uint64 either way) -> int; anything else -> None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, str) and re.match(r"^\s*-?\d+(\.\d+)?\s*$", value):
        return int(float(value)) if "." in value else int(value)
    return None


def epoch_ms(value):
    """A date as ConvertTo-Json (5.1 or 7) or CIM writes it -> milliseconds since 1970 UTC (int); else None.

    Milliseconds are the precision the 5.1 form has, so every form is cut to them before two are compared.
    """
    if not isinstance(value, str):
        return None
    value = value.strip()
    match = _MS_DATE_RE.match(value)
    if match:
        return int(match.group(1))
    match = _ISO_RE.match(value)
    if match:
        return _iso_ms(match)
    match = _DMTF_RE.match(value)
    if match:
        return _dmtf_ms(match)
    return None


def filetime_to_epoch_ms(filetime):
    """A FILETIME (100 ns since 1601, what GetProcessTimes gives) -> milliseconds since 1970, cut like epoch_ms."""
    return (int(filetime) - _FILETIME_EPOCH_OFFSET) // 10000


def _iso_ms(match):
    year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
    fraction, zone = match.group(7) or "", match.group(8)
    if zone is None:
        return None  # a local time without its offset names no instant
    offset = datetime.timedelta(0) if zone == "Z" else _offset(int(zone[1:3]) * 60 + int(zone[4:6]), zone[0])
    moment = datetime.datetime(year, month, day, hour, minute, second, tzinfo=datetime.timezone(offset))
    return _ms_since_epoch(moment) + int((fraction + "000")[:3])


def _dmtf_ms(match):
    year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
    zone = match.group(8)
    moment = datetime.datetime(year, month, day, hour, minute, second,
                               tzinfo=datetime.timezone(_offset(int(zone[1:]), zone[0])))
    return _ms_since_epoch(moment) + int(match.group(7)[:3])


def _offset(minutes, sign):
    return datetime.timedelta(minutes=-minutes if sign == "-" else minutes)


def _ms_since_epoch(moment):
    delta = moment - _EPOCH
    return (delta.days * 86400 + delta.seconds) * 1000
