# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What each protect_* entry means on this node, resolved before anything is signalled: an entry that names nobody
is an error naming the option and the entry, never a protection that silently protects no one.

protect_users: a user name or a numeric uid; a group as @name (or @gid), which protects every process whose real,
effective or supplementary groups hold it, and every process of a user the group database lists as its member
(or whose primary group it is). Names are looked up in the node's user and group database (pwd, grp).
protect_names: non-empty process names. protect_units: units systemd knows (LoadState is not not-found).
"""

from __future__ import annotations

import grp
import pwd

GROUP_PREFIX = "@"
# The largest uid or gid a process can have: uid_t and gid_t are 32 bits, and -1 (4294967295) means "none" to the kernel.
MAX_ID = 4294967294


class ProtectEntryError(ValueError):
    """An entry of a protect_* option that names nothing on this node; the message names the option and the entry."""


def _digits(text):
    return text.isascii() and text.isdigit()


def _id_number(option, entry, digits, what):
    """The uid or gid a string of digits names; a larger number names none (and matches no process)."""
    if len(digits) > len(str(MAX_ID)) or int(digits) > MAX_ID:
        raise ProtectEntryError("%s: %r is no %s (a %s is 0 to %d)" % (option, entry, what, what, MAX_ID))
    return int(digits)


def _blank(option, entry):
    if not isinstance(entry, str) or not entry.strip():
        raise ProtectEntryError("%s: %r names nothing (give a non-empty string)" % (option, entry))
    if entry != entry.strip():
        raise ProtectEntryError("%s: %r has leading or trailing blanks" % (option, entry))


def _group(option, entry, getgrnam, getgrgid):
    name = entry[len(GROUP_PREFIX):]
    if not name:
        raise ProtectEntryError("%s: %r names no group (write @groupname or @gid)" % (option, entry))
    try:
        group = getgrnam(name)
    except KeyError:
        if not _digits(name):
            raise ProtectEntryError("%s: %r: no group %r in this node's group database" % (option, entry, name)) from None
        try:
            group = getgrgid(_id_number(option, entry, name, "gid"))
        except KeyError:
            raise ProtectEntryError("%s: %r: no group with gid %s in this node's group database" % (option, entry, name)) from None
    return group.gr_gid, set(group.gr_mem)


def _user(option, entry, getpwnam, groups=True):
    try:
        return getpwnam(entry).pw_uid
    except KeyError:
        if _digits(entry):
            return _id_number(option, entry, entry, "uid")  # processes may run as uids no database names (a container's, a job's)
        raise ProtectEntryError("%s: %r: no user %r in this node's user database%s"
                                % (option, entry, entry, " (a group is written @%s)" % entry if groups else "")) from None


def check_selected_users(entries, option="users", getpwnam=pwd.getpwnam):
    """Each entry of a selection by user a user of this node, by name or uid: an empty, padded or unknown name (a
    template that came out empty, a typo) would select no holder and say nothing."""
    for position, entry in enumerate(entries or ()):
        where = "%s[%d]" % (option, position)
        _blank(where, entry)
        _user(where, entry, getpwnam, groups=False)


class ProtectedUsers:
    """protect_users resolved: uids, and groups (gid -> the entry that named it, and the member user names)."""

    def __init__(self, entries, option="protect_users", getpwnam=pwd.getpwnam, getgrnam=grp.getgrnam, getgrgid=grp.getgrgid):
        self.uids = {}
        self.groups = {}
        for entry in entries or ():
            _blank(option, entry)
            if entry.startswith(GROUP_PREFIX):
                gid, members = _group(option, entry, getgrnam, getgrgid)
                self.groups[gid] = (entry, members)
            else:
                self.uids.setdefault(_user(option, entry, getpwnam), entry)

    def why(self, uid, user, gids, primary_gid=None):
        """The entry that protects a process of uid/user with these gids (real, effective, supplementary), or None.

        primary_gid: the user's primary group in the user database (None when unknown)."""
        if uid in self.uids:
            return "protected user: %s" % self.uids[uid]
        for gid, (entry, members) in sorted(self.groups.items()):
            if gid in gids or gid == primary_gid or (user is not None and user in members):
                return "protected group: %s" % entry
        return None


def check_entries(params):
    """What can be checked of the protect_* options anywhere (the controller too): every entry a non-empty string,
    a group entry naming a group. Names are resolved on the node (ProtectedUsers, check_units)."""
    for option in ("protect_names", "protect_users", "protect_units"):
        for entry in params.get(option) or ():
            _blank(option, entry)
            if option == "protect_users" and entry == GROUP_PREFIX:
                raise ProtectEntryError("%s: %r names no group (write @groupname or @gid)" % (option, entry))
            if option == "protect_units" and set(entry) & set("*?["):
                raise ProtectEntryError("%s: %r is a pattern; name each unit" % (option, entry))


def check_units(entries, states, option="protect_units"):
    """Fail on an entry systemd does not know (`states`: unit_states() of the entries; empty: no systemctl)."""
    for entry in entries or ():
        _blank(option, entry)
    if entries and not states:
        raise ProtectEntryError("%s: %r cannot be resolved: this node has no systemctl to ask" % (option, entries[0]))
    for entry in entries or ():
        if not states.get(entry, {}).get("loaded"):
            raise ProtectEntryError("%s: %r: systemd knows no such unit" % (option, entry))


def process_gids(pid, proc_root="/proc"):
    """The real, effective, saved, filesystem and supplementary gids of pid (/proc/<pid>/status), empty when gone."""
    gids = set()
    try:
        with open("%s/%d/status" % (proc_root, pid)) as handle:
            for line in handle:
                if line.startswith(("Gid:", "Groups:")):
                    gids.update(int(value) for value in line.split(":", 1)[1].split())
    except (OSError, ValueError):
        pass
    return gids


def primary_gid(uid, getpwuid=pwd.getpwuid):
    try:
        return getpwuid(uid).pw_gid
    except (KeyError, TypeError, OverflowError):
        return None
