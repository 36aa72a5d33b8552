import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from zarrfs.geometry import box_shape, c_order_boxes, chunk_parts, chunks_spanned, full_box, whole_chunks

shapes = st.lists(st.integers(0, 6), min_size=0, max_size=4).map(tuple)


@given(shapes, st.data())
def test_c_order_boxes_cover_exactly_the_flat_span(shape, data):
    size = math.prod(shape)
    start = data.draw(st.integers(0, size))
    stop = data.draw(st.integers(start, size))
    flat = np.arange(size).reshape(shape)
    boxes = c_order_boxes(shape, start, stop)
    got = np.concatenate([flat[b].reshape(-1) for b in boxes]) if boxes else np.empty(0, int)
    assert got.tolist() == list(range(start, stop))
    assert len(boxes) <= max(1, 2 * len(shape) - 1)


@given(shapes, st.data())
def test_chunk_parts_tile_a_box(shape, data):
    chunk_shape = tuple(data.draw(st.integers(1, 4)) for _ in shape)
    box = tuple(slice(*sorted(data.draw(st.tuples(st.integers(0, n), st.integers(0, n))))) for n in shape)
    array = np.arange(math.prod(shape)).reshape(shape)
    out = np.full(box_shape(box), -1)
    for part in chunk_parts(box, chunk_shape, shape):
        origin = [c * s for c, s in zip(part.coords, chunk_shape, strict=False)]
        chunk = array[tuple(slice(o, o + s) for o, s in zip(origin, chunk_shape, strict=False))]
        assert (out[part.out_box] == -1).all()  # no overlap
        out[part.out_box] = chunk[part.chunk_box]
        inside = tuple(slice(0, min(s, n - o)) for s, n, o in zip(chunk_shape, shape, origin, strict=False))
        assert part.complete == (part.chunk_box == inside)
    assert (out == array[box]).all()


@given(shapes.filter(lambda s: math.prod(s) > 0), st.data())
def test_chunks_spanned_counts_the_chunks_a_spans_boxes_meet(shape, data):
    """For a span's boxes (a partial row, whole rows, a partial row): at least every chunk its
    elements lie in (make_room keeps that many), exactly those for one box."""
    chunk_shape = tuple(data.draw(st.integers(1, 4)) for _ in shape)
    size = math.prod(shape)
    start = data.draw(st.integers(0, size - 1))
    stop = data.draw(st.integers(start + 1, size))
    boxes = c_order_boxes(shape, start, stop)
    met = {part.coords for box in boxes for part in chunk_parts(box, chunk_shape, shape)}
    assert chunks_spanned(boxes, chunk_shape) >= len(met)
    if len(boxes) == 1:
        assert chunks_spanned(boxes, chunk_shape) == len(met)


def test_zero_dimensional():
    assert c_order_boxes((), 0, 1) == [()]
    assert list(chunk_parts((), (), ())) == [((), (), (), True)]
    assert full_box((2, 3)) == (slice(0, 2), slice(0, 3))


def test_flat_index_is_numpys_c_order_position():
    import itertools

    from zarrfs.geometry import flat_index

    for shape in [(3,), (2, 3), (4, 1, 5), (2, 3, 4, 2)]:
        for index in itertools.product(*[range(n) for n in shape]):
            assert flat_index(index, shape) == np.ravel_multi_index(index, shape)
    assert flat_index((), ()) == 0


@given(shapes.filter(bool), st.data())
def test_whole_chunks_and_the_edges_cover_the_array_once(shape, data):
    """The box of whole chunks meets only whole chunks; it and the edge boxes cover every element once."""
    chunk_shape = tuple(data.draw(st.integers(1, 4)) for _ in shape)
    inside, edges = whole_chunks(shape, chunk_shape)
    covered = np.zeros(shape, int)
    for box in [inside, *edges]:
        covered[box] += 1
    assert (covered == 1).all()
    assert all(part.complete and box_shape(part.chunk_box) == chunk_shape
               for part in chunk_parts(inside, chunk_shape, shape))
    assert all(all(s.start < s.stop for s in box) for box in edges)
