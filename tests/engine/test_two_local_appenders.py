"""Two processes append to one array of a local store at once (docs/writing.md, "Two writers
appending"): each stores one record per write-back, many times. The look at the stored shape,
the chunks and the new shape are one step among zarrfs processes (the store's lock of the
document's directory), so every record of both is stored, each writer's in its order, and the
shape counts them all; with consolidated metadata, the copy's shape too."""

import multiprocessing
import multiprocessing.synchronize

import numpy as np
import pytest
import zarr

import zarrfs

APPENDS = 200  # records each writer appends, one per write-back
WIDTH = 3  # elements of a record


def append(root: str, writer: int, start: multiprocessing.synchronize.Event) -> None:
    """One writer: APPENDS records (writer, n, -1), each stored by its own flush."""
    with zarrfs.open_raw(root, "a", mode="r+", grow="all") as view:
        start.wait(60)
        for n in range(APPENDS):
            view.append(np.array([writer, n, -1], "<i4").tobytes())
            view.flush()


def run_two_writers(root: str) -> None:
    spawn = multiprocessing.get_context("spawn")  # no fork of a process that has threads
    start = spawn.Event()
    writers = [spawn.Process(target=append, args=(root, writer, start)) for writer in (1, 2)]
    for process in writers:
        process.start()
    start.set()
    try:
        for process in writers:
            process.join(300)
            assert process.exitcode == 0
    finally:
        for process in writers:
            if process.is_alive():
                process.kill()
                process.join()


def check_records(records: np.ndarray) -> None:
    """Every record of both writers, each writer's in the order it appended them."""
    assert len(records) == 2 * APPENDS
    for writer in (1, 2):
        assert records[records[:, 0] == writer, 1].tolist() == list(range(APPENDS))
    assert (records[:, 2] == -1).all()


@pytest.mark.parametrize("rows", [1, 4])  # a chunk a record, and records sharing chunks
def test_two_processes_appending_store_every_record(tmp_path, rows):
    root = str(tmp_path / "g.zarr")
    zarr.open_group(root, mode="w").create_array("a", shape=(0, WIDTH), chunks=(rows, WIDTH), dtype="<i4",
                                                 fill_value=0)
    run_two_writers(root)
    array = zarr.open_array(root, path="a")
    assert array.shape == (2 * APPENDS, WIDTH)
    check_records(array[...])


def test_two_processes_appending_keep_the_consolidated_copy_whole(tmp_path):
    root = str(tmp_path / "g.zarr")
    group = zarr.open_group(root, mode="w")
    group.create_array("a", shape=(0, WIDTH), chunks=(2, WIDTH), dtype="<i4", fill_value=0)
    group.create_array("b", shape=(2,), chunks=(2,), dtype="<i4", fill_value=0)
    zarr.consolidate_metadata(root)
    run_two_writers(root)
    consolidated = zarr.open_consolidated(root)
    assert consolidated["a"].shape == (2 * APPENDS, WIDTH)
    assert consolidated["b"].shape == (2,)
    check_records(consolidated["a"][...])
