"""Deletes in the file managers people use, driven for real: pcmanfm and Thunar under a virtual
X server (Xvfb), keys pressed with xdotool, each in a home and session of its own. A selection
of an array's files and a group's folder are deleted with the Delete key, and every dialog that
asks is answered yes: the hierarchy ends as the person meant it, with no error dialog.

Each wait polls a condition with a deadline: the daemon's trace (-o debug) says when the file
manager has unlinked what it was asked to, and the windows shown say whether it reported an
error."""

import os
import re
import signal
import socket
import struct
import subprocess
import warnings

import numpy as np
import pytest
import zarr

from mounting import mounted, wait_for

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
    """A virtual X server and the environment of a session on it: HOME, XDG directories and the
    runtime directory in the test's own temporary directory, so nothing is read from or left in
    the machine's. `start(*command)` runs a program in a D-Bus session of its own."""

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        home = tmp_path / "home"
        runtime = tmp_path / "runtime"
        home.mkdir()
        runtime.mkdir(mode=0o700)
        self.processes: list[subprocess.Popen] = []
        self.server, display = answering_server()
        self.env = {"PATH": os.environ["PATH"], "HOME": str(home), "DISPLAY": f":{display}",
                    "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
                    "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local/state"),
                    "XDG_RUNTIME_DIR": str(runtime), "NO_AT_BRIDGE": "1", "LANG": "C.UTF-8"}

    def start(self, *command) -> None:
        """Its output, the bus's included, goes to NAME.log in the test's directory: a file
        manager whose window never shows says why there (output())."""
        with open(self.tmp_path / f"{command[0]}.log", "ab") as log:
            self.processes.append(subprocess.Popen(["dbus-run-session", "--", *command], env=self.env,
                                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True))

    def ended(self) -> bool:
        return any(p.poll() is not None for p in self.processes)

    def output(self) -> str:
        """What the sessions started have written so far, and how each has ended if it has."""
        ended = [f"{p.args[2]} exited with {p.returncode}" for p in self.processes if p.poll() is not None]
        logs = [f"{log.name}:\n{log.read_text(errors='replace')}" for log in sorted(self.tmp_path.glob("*.log"))
                if log.name != "mnt.log"]
        return "\n".join([*ended, *logs])

    def close(self) -> None:
        """Each session started (the file manager, its bus and what the bus started: one process
        group each, made here), then the server."""
        for process in [*self.processes, self.server]:
            stop(process)

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


def stop(process: subprocess.Popen) -> None:
    """The process group `process` leads (made with start_new_session): terminated, and killed if
    it lingers."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(10)
            break
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture
def desktop(tmp_path):
    d = Desktop(tmp_path)
    try:
        yield d
    finally:
        d.close()


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


def check_store(root) -> None:
    group = zarr.open_group(str(root), mode="r")
    assert sorted(name for name, _ in group.members()) == ["keep"]  # lat and text deleted, nothing else
    assert group["keep"][...].tolist() == [7, 7, 7]


def test_pcmanfm_deletes_an_arrays_files_and_a_group_folder_without_an_error(tmp_path, desktop):
    """pcmanfm stats each file just before deleting it: once lat.bin had deleted the array, every
    other file of the selection was an error ("Error when getting information for file")."""
    root = make_store(tmp_path / "s.zarr")
    with mounted(root, tmp_path, "debug") as m:
        names = sorted(n for n in os.listdir(m.path) if n.startswith("lat."))
        assert len(names) >= 7 and names[0] == "lat.bin"  # the data file first
        desktop.start("pcmanfm", str(m.path))
        main = window_of(desktop, r"^mnt$")
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
    check_store(root)


def test_thunar_deletes_an_arrays_files_and_a_group_folder_without_an_error(tmp_path, desktop):
    """Without gvfs (the trash:// scheme) Thunar's Delete key deletes permanently, which the
    code before passed too; with gvfs it first asks GIO's access::can-trash, now FALSE here
    (test_file_manager.py), and takes this same path instead of trashing a folder."""
    root = make_store(tmp_path / "s.zarr")
    with mounted(root, tmp_path, "debug") as m:
        names = sorted(n for n in os.listdir(m.path) if n.startswith("lat."))
        desktop.start("thunar", str(m.path))
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
    check_store(root)
