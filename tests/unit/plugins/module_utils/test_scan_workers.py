# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the holder scan shares its work among forked workers (the queue of pieces in a pipe) and finds its needles in
maps files (the C library's memmem): real forks, real pipes, real maps files."""

from __future__ import annotations

import os
import select

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _device_nodes
from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _procscan as procscan

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

NAMES = [str(pid) for pid in range(1000, 1700)]


def _read_within_deadline(fd, what):
    """One byte of fd (b"" at its end), failing the test when nothing comes within the deadline."""
    ready, _write, _error = select.select([fd], [], [], bounded.DEADLINE)
    if not ready:
        pytest.fail("nothing came within %ss: %s" % (bounded.DEADLINE, what))
    return os.read(fd, 1)


def _done_by(results):
    """{pid: number of pieces} of the results of a work function that returns [pid, piece]."""
    counts = {}
    for pid, _piece in results:
        counts[pid] = counts.get(pid, 0) + 1
    return counts


def test_every_piece_is_done_once_and_the_results_come_in_order():
    results = procscan._shared(NAMES, 3, lambda piece: [os.getpid(), piece])  # pylint: disable=protected-access

    assert [name for _pid, piece in results for name in piece] == NAMES
    assert len(results) > 3  # pieces, not one share per worker


def test_one_worker_does_the_whole_list_in_one_call():
    assert procscan._shared(NAMES, 1, lambda piece: [os.getpid(), piece]) == [[os.getpid(), NAMES]]  # pylint: disable=protected-access


def test_a_worker_held_up_on_its_first_piece_leaves_the_rest_to_the_others():
    # The forked worker blocks in its first piece until this process has done every other piece: with fixed shares
    # it would still owe half the list; taking pieces from the queue, it does only the one it holds.
    parent = os.getpid()
    size = max(1, -(-len(NAMES) // (2 * procscan._PIECES_PER_WORKER)))  # pylint: disable=protected-access
    pieces = -(-len(NAMES) // size)
    started_read, started_write = os.pipe()
    gate_read, gate_write = os.pipe()
    gate = [gate_write]
    done_here = []

    def open_gate():
        while gate:
            os.close(gate.pop())

    def work(piece):
        if os.getpid() != parent:
            open_gate()  # this process's copy: the gate opens when the parent closes its own
            os.write(started_write, b"s")
            _read_within_deadline(gate_read, "the parent to open the gate")
            return [os.getpid(), piece]
        if not done_here:
            _read_within_deadline(started_read, "the forked worker to start its first piece")
        done_here.append(piece)
        if len(done_here) == pieces - 1:
            open_gate()
        return [os.getpid(), piece]

    try:
        results = procscan._shared(NAMES, 2, work)  # pylint: disable=protected-access
    finally:
        open_gate()
        for fd in (started_read, started_write, gate_read):
            os.close(fd)
    counts = _done_by(results)
    assert [name for _pid, piece in results for name in piece] == NAMES
    assert counts[parent] == pieces - 1
    assert sorted(counts.values()) == [1, pieces - 1]


def test_the_pieces_of_a_worker_that_died_are_done_here():
    parent = os.getpid()

    def work(piece):
        if os.getpid() != parent:
            os._exit(3)  # pylint: disable=protected-access
        return [os.getpid(), piece]

    results = procscan._shared(NAMES, 3, work)  # pylint: disable=protected-access

    assert [name for _pid, piece in results for name in piece] == NAMES
    assert _done_by(results) == {parent: len(results)}


def test_any_number_of_workers_fits_the_queue_in_one_write():
    names = [str(pid) for pid in range(300000)]
    results = procscan._shared(names, 33, len)  # pylint: disable=protected-access
    assert sum(results) == len(names)
    assert len(results) <= procscan._MAX_PIECES  # pylint: disable=protected-access


@pytest.mark.parametrize("data, needle", [
    (b" fe:01 2746459 /usr/lib/x", b" fe:01 274"),
    (b"7f00-7f01 r--p 00000000 00:05 1034   /dev/nvidia1\n", b" 00:05 "),
    (b"a" * 5000 + b" fe:01 27", b" fe:01 27"),
    (b" fe:01 2\0 fe:01 27", b" fe:01 27"),
    (b" fe:01 2\0 fe:01 2", b" fe:01 27"),
    (b" fe:01 26", b" fe:01 27"),
    (b"", b" fe:01 27"),
    (b" fe:0", b" fe:01 27"),
])
def test_the_needle_search_agrees_with_python(data, needle):
    assert procscan._contains_function()(data, needle) is (needle in data)  # pylint: disable=protected-access


def test_the_needle_search_finds_every_line_of_a_real_maps_file():
    with open("/proc/self/maps", "rb") as handle:
        data = handle.read()
    contains = procscan._contains_function()  # pylint: disable=protected-access
    for line in data.splitlines():
        fields = line.split(None, 5)
        needle = b" %s %s" % (fields[3], fields[4])
        assert contains(data, needle)
        assert not contains(data, needle + b"0" * 20)


def test_files_mapped_together_show_what_each_shows_alone(tmp_path):
    paths = []
    for name in ("nvidia0", "nvidia1", "nvidia-uvm"):
        (tmp_path / name).write_bytes(b"\0" * 4096)
        paths.append(str(tmp_path / name))
    together = _device_nodes._fields_as_mapped_all(paths + [str(tmp_path / "missing")])  # pylint: disable=protected-access

    assert together == dict((path, _device_nodes._fields_as_mapped(path)) for path in paths)  # pylint: disable=protected-access
    for path in paths:
        st = os.stat(path)
        assert together[path] == (b" %02x:%02x " % (os.major(st.st_dev), os.minor(st.st_dev)), b"%d" % st.st_ino)
