"""Deletes in the file managers people use, driven for real: pcmanfm and Thunar under a virtual
X server (Xvfb), keys pressed with xdotool, each in a home and session of its own. A selection
of an array's files and a group's folder are deleted with the Delete key, and every dialog that
asks is answered yes: the hierarchy ends as the person meant it, with no error dialog, nothing
made in the store and nothing in the home's trash.

Each runs with gvfs, as on an XFCE or LXDE desktop (gvfsd started by the session's bus: the
trash:// scheme, which makes Delete try the trash first), and without it (GIO on its own).

Each wait polls a condition with a deadline: the daemon's trace (-o debug) says when the file
manager has unlinked what it was asked to, and the windows shown say whether it reported an
error."""

import contextlib
import os
import re
import socket
import struct
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr

from mounting import mounted, wait_for
from session_bus import SessionBus, home_trash, running, session_env, stop, without_gvfs

pytestmark = pytest.mark.desktop
DEADLINE = 60.0  # seconds for a file manager to start, or to finish a delete, on a loaded machine


def make_store(root):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        group = zarr.open_group(str(root), mode="w", zarr_format=3)
        lat = group.create_array("lat", shape=(20, 30), chunks=(10, 10), dtype="f4", dimension_names=("y", "x"))
        lat[...] = np.arange(600, dtype="f4").reshape(20, 30)
        text = group.create_group("text")
        text.create_array("auto_chunks", shape=(5,), dtype=str)[...] = list("abcde")
        text.create_array("v", shape=(4, 4), chunks=(2, 2), dtype="i2")[...] = 1
        text.create_group("inner").create_array("w", shape=(3,), dtype="f8")[...] = 2
        group.create_array("keep", shape=(3,), dtype="u1")[...] = 7
    return root


class Desktop:
    """A virtual X server and a session on it: HOME, XDG directories and the runtime directory in
    the test's own temporary directory, so nothing is read from or left in the machine's, and a
    D-Bus session bus of its own, which starts gvfs when a program asks for it (`gvfs`), or in
    which GIO has no module of gvfs's, as on a machine without it. `start(*command)` runs a
    program in that session."""

    def __init__(self, tmp_path, gvfs: bool):
        self.tmp_path = tmp_path
        self.gvfs = gvfs
        self.processes: list[subprocess.Popen] = []
        self.env = {**session_env(tmp_path), "NO_AT_BRIDGE": "1",
                    **({} if gvfs else without_gvfs(tmp_path / "gio-modules"))}
        self.server, display = answering_server()
        self.env["DISPLAY"] = f":{display}"
        try:
            self.bus = SessionBus(self.env, tmp_path / "bus.log")
        except BaseException:
            stop(self.server)
            raise
        self.env["DBUS_SESSION_BUS_ADDRESS"] = self.bus.address

    def start(self, *command) -> subprocess.Popen:
        """Its output goes to NAME.log in the test's directory: a file manager whose window never
        shows says why there, or in the bus's log (output())."""
        with open(self.tmp_path / f"{command[0]}.log", "ab") as log:
            process = subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        self.processes.append(process)
        return process

    def ended(self) -> bool:
        return any(p.poll() is not None for p in self.processes)

    def output(self) -> str:
        """What the programs started and the bus have written so far, and how each program has
        ended if it has."""
        ended = [f"{p.args[0]} exited with {p.returncode}" for p in self.processes if p.poll() is not None]
        logs = [f"{log.name}:\n{log.read_text(errors='replace')}" for log in sorted(self.tmp_path.glob("*.log"))
                if log.name != "mnt.log"]
        return "\n".join([*ended, *logs])

    def close(self) -> None:
        """Each program started (one process group each, made here), then the bus with what it
        started (gvfsd and its backends), then the server: each of them, even where ending one
        before it failed (the error is raised after)."""
        with contextlib.ExitStack() as ending:  # its callbacks run last first
            ending.callback(stop, self.server)
            ending.callback(self.bus.close)
            for process in self.processes:
                ending.callback(stop, process)

    def gio(self, *args) -> subprocess.CompletedProcess:
        """`gio` in this session, as the file manager's GIO sees it."""
        return subprocess.run(["gio", *args], env=self.env, capture_output=True, text=True, timeout=60)

    def check_gvfs(self, program: subprocess.Popen) -> None:
        """With gvfs, `program` asked the bus for gvfsd (so its GIO goes through gvfs) and
        trash:/// answers in the session; without, trash:/// is an unknown scheme (a program asking
        for gvfs nonetheless is caught by check_no_gvfs_asked at the end)."""
        if self.gvfs:
            wait_for(lambda: program.pid in self.bus.activated("org.gtk.vfs.Daemon"), DEADLINE,
                     what=f"{program.args[0]} asking the session's bus for gvfsd")
        trash = self.gio("info", "trash:///")
        assert (trash.returncode == 0) == self.gvfs, trash.stderr
        if self.gvfs:
            assert "trash::item-count: 0" in trash.stdout, trash.stdout

    def check_no_gvfs_asked(self) -> None:
        """Without gvfs, nothing in the session asked for any of its services."""
        if not self.gvfs:
            assert "org.gtk.vfs" not in self.bus.log(), self.bus.log()

    def xdotool(self, *args) -> str:
        return subprocess.run(["xdotool", *args], env=self.env, capture_output=True, text=True, timeout=30).stdout

    def windows(self) -> dict[str, str]:
        """Window id -> title, of every window shown with a title (GTK maps untitled helpers)."""
        ids = self.xdotool("search", "--onlyvisible", "--name", "").split()
        titles = {w: self.xdotool("getwindowname", w).strip() for w in ids}
        return {w: title for w, title in titles.items() if title}

    def titled(self, pattern: str) -> str | None:
        return next((w for w, title in self.windows().items() if re.search(pattern, title)), None)

    def focus(self, window: str) -> bool:
        """Focus `window` (there is no window manager to do it): whether it has the focus now. A
        dialog that closed meanwhile has not, and keys meant for it must not reach the window
        beneath (Return there would open the selected files)."""
        self.xdotool("windowfocus", "--sync", window)
        return self.xdotool("getwindowfocus").strip() == window

    def keys(self, window: str, *keys: str) -> None:
        if self.focus(window):
            self.xdotool("key", "--delay", "50", *keys)

    def type(self, window: str, text: str) -> None:
        if self.focus(window):
            self.xdotool("type", "--delay", "20", text)

    def answer(self, dialog: str, keys: tuple[str, ...], then) -> None:
        """Until then() holds, press `keys` in each window titled `dialog` that asks."""
        def answered() -> bool:
            window = self.titled(dialog)
            if window is not None:
                self.keys(window, *keys)
            return then()
        wait_for(answered, DEADLINE, what=f"{dialog!r} answered and the delete done")


SERVER_STARTS = 3  # Xvfb started at most this many times until its display answers as its own
SERVER_WAIT = 20.0  # seconds for a display to answer on a loaded machine


def answering_server() -> tuple[subprocess.Popen, str]:
    """An Xvfb of this test and its display number, once that display answers as this server's.
    With -displayfd Xvfb takes the first number whose sockets it can bind and makes no lock
    file, and under other tests' Xvfb starting and stopping the number it gave once did not
    answer (thunar: "cannot open display :0"): nothing starts before xdpyinfo is answered there
    and both of the display's sockets are this server's; else this server is stopped and another
    takes the next number free."""
    for _ in range(SERVER_STARTS):
        server, display = xvfb()
        if answered(server, display):
            return server, display
        stop(server)
    raise AssertionError(f"no Xvfb of {SERVER_STARTS} started had a display that answered as its own")


def answered(server: subprocess.Popen, display: str) -> bool:
    """Whether `display` answers as `server`'s within SERVER_WAIT (polled; False at once if the
    server has ended)."""
    try:
        wait_for(lambda: server.poll() is not None or serves(server, display), SERVER_WAIT,
                 what=f"display :{display} answering as Xvfb {server.pid}'s")
    except TimeoutError:
        return False
    return server.poll() is None


def xvfb() -> tuple[subprocess.Popen, str]:
    read, write = os.pipe()
    # -noreset: by default Xvfb resets when its last client leaves (xdpyinfo's check below), and a
    # client connecting during the reset, long on a loaded machine, got "Cannot open display"
    server = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", "1280x800x24", "-nolisten", "tcp",
                               "-noreset"],
                              pass_fds=[write], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    os.close(write)
    with os.fdopen(read) as displayfd:
        display = displayfd.readline().strip()  # written once it has bound the display's sockets
    assert display, "Xvfb did not start"
    return server, display


def serves(server: subprocess.Popen, display: str) -> bool:
    """Whether `server` answers at `display`: its socket (the file, and on Linux the abstract one
    libxcb tries first) is this server's, and an X client is answered there."""
    sockets = (f"/tmp/.X11-unix/X{display}", f"\0/tmp/.X11-unix/X{display}")
    if any(peer_pid(address) != server.pid for address in sockets):
        return False
    return subprocess.run(["xdpyinfo", "-display", f":{display}"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, timeout=30).returncode == 0


def peer_pid(address: str) -> int | None:
    """The process listening at the Unix socket `address`, None if none answers."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        try:
            connection.connect(address)
        except OSError:
            return None
        credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", credentials)[0]


@pytest.fixture
def desktop(request, tmp_path):
    """A desktop with gvfs if the test parametrizes it so (indirect), else without."""
    d = Desktop(tmp_path, gvfs=getattr(request, "param", False))
    try:
        yield d
    finally:
        d.close()


WITH_AND_WITHOUT_GVFS = pytest.mark.parametrize("desktop", [True, False], ids=["gvfs", "no_gvfs"], indirect=True)


def test_the_display_answers_as_this_tests_server_before_any_program_starts(desktop):
    """Xvfb -displayfd gives a number and takes no lock: thunar once could not open the display
    it gave, as other tests' servers started and stopped. A display is handed out once it
    answers, as its own server's; one another server holds is never taken for it."""
    display = desktop.env["DISPLAY"].removeprefix(":")
    assert subprocess.run(["xdpyinfo"], env=desktop.env, capture_output=True).returncode == 0  # no wait here
    assert peer_pid(f"\0/tmp/.X11-unix/X{display}") == peer_pid(f"/tmp/.X11-unix/X{display}") == desktop.server.pid
    other, other_display = xvfb()
    try:
        assert other_display != display and answered(other, other_display)
        assert not serves(desktop.server, other_display) and not serves(other, display)  # each answers, as its own
    finally:
        stop(other)


@pytest.mark.parametrize("desktop", [True], ids=["gvfs"], indirect=True)
def test_gvfs_ends_with_the_session_that_started_it(desktop):
    """gvfsd and its backends are started by the session's bus, not as children of anything the
    test started: they end with the bus's process group, and nothing of them is left running."""
    assert desktop.gio("info", "trash:///").returncode == 0  # gvfsd, which starts gvfsd-trash
    started = desktop.bus.members()
    assert {"gvfsd", "gvfsd-trash"} <= set(started.values()), started
    assert "gvfsd-fuse" not in started.values() and not os.path.ismount(Path(desktop.env["XDG_RUNTIME_DIR"], "gvfs"))
    desktop.close()
    assert {pid: name for pid, name in started.items() if running(pid)} == {}


def unlinked(m, paths) -> bool:
    log = m.log()
    return all(re.search(rf"tracing: unlink {re.escape(p)} -> 0 \(", log) for p in paths)


def traced(m, operation: str, path: str) -> bool:
    return re.search(rf"tracing: {operation} {re.escape(path)} -> 0 \(", m.log()) is not None


def window_of(desktop, pattern: str) -> str:
    """The window titled `pattern`, once shown; an error at once, with the sessions' output, if a
    program started has ended (it will show nothing)."""
    def shown() -> bool:
        return desktop.ended() or desktop.titled(pattern) is not None
    try:
        wait_for(shown, DEADLINE, what=f"a window titled {pattern!r}")
    except TimeoutError as e:
        raise TimeoutError(f"{e}; windows shown: {sorted(desktop.windows().values())}\n{desktop.output()}") from None
    window = desktop.titled(pattern)
    assert window is not None, f"no window titled {pattern!r}: a program ended\n{desktop.output()}"
    return window


def finished_without_a_dialog(desktop, main: str) -> None:
    """Every window but the file manager's own closes (a progress window closes when its job
    ends without error; one listing errors stays until closed)."""
    wait_for(lambda: set(desktop.windows().values()) <= {main}, DEADLINE,
             what=f"no window but {main!r}: {sorted(desktop.windows().values())}")


def check_store(root, desktop) -> None:
    """lat and text deleted, nothing else, and nothing made: no trash folder in the store, nothing
    moved to the home's trash, and, without gvfs, gvfs never asked for."""
    assert sorted(os.listdir(root)) == ["keep", "zarr.json"]
    group = zarr.open_group(str(root), mode="r")
    assert sorted(name for name, _ in group.members()) == ["keep"]
    assert group["keep"][...].tolist() == [7, 7, 7]
    assert home_trash(desktop.env) == []
    desktop.check_no_gvfs_asked()


@WITH_AND_WITHOUT_GVFS
def test_pcmanfm_deletes_an_arrays_files_and_a_group_folder_without_an_error(tmp_path, desktop):
    """pcmanfm stats each file just before deleting it: once lat.bin had deleted the array, every
    other file of the selection was an error ("Error when getting information for file"). With
    gvfs or without, it asks "move to the trash?", finds none (g_file_trash fails: .Trash-UID is
    a file) and asks "delete instead?"."""
    root = make_store(tmp_path / "s.zarr")
    with mounted(root, tmp_path, "debug") as m:
        names = sorted(n for n in os.listdir(m.path) if n.startswith("lat."))
        assert len(names) >= 7 and names[0] == "lat.bin"  # the data file first
        pcmanfm = desktop.start("pcmanfm", str(m.path))
        main = window_of(desktop, r"^mnt$")
        desktop.check_gvfs(pcmanfm)
        desktop.keys(main, "ctrl+e")  # View > Filter: show only the array's files
        desktop.type(window_of(desktop, "^Select filter$"), "lat.*")
        desktop.keys(desktop.titled("^Select filter$"), "Return")
        main = window_of(desktop, r"^mnt \[lat\.\*\]$")
        desktop.keys(main, "ctrl+a", "Delete")  # move to the trash?, then: no trash here, delete instead?
        desktop.answer("^Confirm$", ("Return",),
                       lambda: unlinked(m, [f"/{n}" for n in names]) or desktop.titled("^Finished$") is not None)
        finished_without_a_dialog(desktop, "mnt [lat.*]")
        assert not [n for n in os.listdir(m.path) if n.startswith("lat.")]
        desktop.keys(main, "ctrl+e")  # now the group's folder
        desktop.keys(window_of(desktop, "^Select filter$"), "ctrl+a")
        desktop.type(desktop.titled("^Select filter$"), "text")
        desktop.keys(desktop.titled("^Select filter$"), "Return")
        main = window_of(desktop, r"^mnt \[text\]$")
        desktop.keys(main, "ctrl+a", "Delete")
        desktop.answer("^Confirm$", ("Return",),
                       lambda: traced(m, "rmdir", "/text") or desktop.titled("^Finished$") is not None)
        finished_without_a_dialog(desktop, "mnt [text]")
        assert "text" not in os.listdir(m.path) and "keep.bin" in os.listdir(m.path)
    check_store(root, desktop)


@WITH_AND_WITHOUT_GVFS
def test_thunar_deletes_an_arrays_files_and_a_group_folder_without_an_error(tmp_path, desktop):
    """Without gvfs (the trash:// scheme) Thunar's Delete key deletes permanently; with gvfs it
    first asks GIO's access::can-trash, FALSE here (test_file_manager.py), and takes this same
    path ("permanently delete?"). With can-trash TRUE (no .Trash-UID), only the run with gvfs
    failed: Thunar tried the trash (mkdir .Trash-0, refused) and never asked "Attention"."""
    root = make_store(tmp_path / "s.zarr")
    with mounted(root, tmp_path, "debug") as m:
        names = sorted(n for n in os.listdir(m.path) if n.startswith("lat."))
        thunar = desktop.start("thunar", str(m.path))
        desktop.check_gvfs(thunar)
        for pattern, done in (("lat.*", lambda: unlinked(m, [f"/{n}" for n in names])),
                              ("text", lambda: traced(m, "rmdir", "/text"))):
            main = window_of(desktop, r"^mnt - Thunar$")
            desktop.keys(main, "ctrl+s")  # Edit > Select by Pattern
            desktop.type(window_of(desktop, "^Select by Pattern$"), pattern)
            desktop.keys(desktop.titled("^Select by Pattern$"), "Return")
            wait_for(lambda: desktop.titled("^Select by Pattern$") is None, DEADLINE, what="the pattern taken")
            desktop.keys(main, "Delete")  # no trash here: "permanently delete?", answered Delete
            desktop.answer("^Attention$", ("Return",), lambda done=done: done() or desktop.titled("^Error") is not None)
            finished_without_a_dialog(desktop, "mnt - Thunar")
        assert not [n for n in os.listdir(m.path) if n.startswith("lat.") or n == "text"]
    check_store(root, desktop)
