"""LSH_PROJECTION, SKIP_GRAM and HASHTABLE_LOOKUP against LiteRT (strings included)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_matches_litert, litert_interpreter, run_litert, run_ours

from delegate_runtime.builder import ModelBuilder
from delegate_runtime.errors import ModelError
from delegate_runtime.strings import strings_array
from tests.ops.oneop import random_array

RNG = np.random.default_rng(7)
STR = np.dtype(object)
SPARSE, DENSE = 1, 2


def assert_strings_match_litert(model: bytes, inputs: list) -> list[np.ndarray]:
    """Like assert_matches_litert, for outputs that may be STRING (object arrays of bytes)."""
    expected, got = run_litert(model, inputs), run_ours(model, inputs)
    assert len(got) == len(expected)
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert g.dtype == e.dtype, f"output {i}: dtype {g.dtype} != LiteRT {e.dtype}"
        assert g.shape == e.shape, f"output {i}: shape {g.shape} != LiteRT {e.shape}"
        assert g.tolist() == e.tolist(), f"output {i}: {g.tolist()} != LiteRT {e.tolist()}"
    return got


def assert_both_refuse(model: bytes, inputs: list, match: str, litert_says: str) -> None:
    """LiteRT refuses the model (at allocation or invoke) saying `litert_says`, and we raise
    ModelError matching `match`."""
    with pytest.raises((RuntimeError, ValueError)) as refusal:
        it = litert_interpreter(model)
        for d, x in zip(it.get_input_details(), inputs, strict=True):
            it.set_tensor(d["index"], x)
        it.invoke()
    assert litert_says in str(refusal.value)
    with pytest.raises(ModelError, match=match):
        run_ours(model, inputs)


# -- LSH_PROJECTION -----------------------------------------------------------------------


def build_lsh(
    kind: int, seeds: np.ndarray, x: np.ndarray, weight: np.ndarray | None, const_x: bool = False
) -> tuple[bytes, list[np.ndarray]]:
    b = ModelBuilder()
    g = b.main
    h = g.const("seeds", seeds.astype(np.float32))
    feeds = []
    if const_x:
        xi = g.const("x", x, dtype=x.dtype)
    else:
        xi = g.input("x", x.shape, x.dtype)
        feeds.append(x)
    ins = [h, xi]
    if weight is not None:
        ins.append(g.input("w", weight.shape, np.float32))
        feeds.append(weight)
    n = seeds.shape[0] if kind == SPARSE else seeds.size
    y = g.tensor("y", (n,), np.int32)
    g.op("LSH_PROJECTION", ins, [y], type=kind)
    g.output(y)
    return b.build(), feeds


def _seeds(num_hash: int, num_bits: int) -> np.ndarray:
    return RNG.uniform(-1, 1, (num_hash, num_bits)).astype(np.float32)


LSH_CASES = {
    "sparse_float_rows_weighted": (SPARSE, (4, 6), (5, 3), np.float32, True),
    "sparse_int32_vector": (SPARSE, (3, 8), (7,), np.int32, False),
    "sparse_long_rows": (SPARSE, (2, 10), (3, 20), np.float32, True),  # 84-byte keys
    "sparse_very_long_rows": (SPARSE, (2, 4), (2, 50), np.float32, False),  # 204-byte keys
    "sparse_uint8_rank3": (SPARSE, (3, 5), (4, 2, 3), np.uint8, True),
    "dense_float_weighted": (DENSE, (3, 4), (6, 2), np.float32, True),
    "dense_int8_unweighted": (DENSE, (2, 7), (9,), np.int8, False),
    "dense_bool": (DENSE, (2, 3), (5,), np.bool_, False),
    "sparse_one_bit": (SPARSE, (5, 1), (4,), np.float32, False),
}


@pytest.mark.parametrize("case", LSH_CASES, ids=LSH_CASES.keys())
def test_lsh_projection(case: str) -> None:
    kind, seed_shape, x_shape, dtype, weighted = LSH_CASES[case]
    x = random_array(RNG, x_shape, dtype)
    weight = RNG.uniform(-2, 2, x_shape[0]).astype(np.float32) if weighted else None
    model, feeds = build_lsh(kind, _seeds(*seed_shape), x, weight)
    assert_matches_litert(model, feeds)


def test_lsh_projection_32_bits_wrap_as_int32() -> None:
    """32 bits per hash function fill the int32: the signatures wrap as TFLite's do."""
    x = RNG.standard_normal((6, 2)).astype(np.float32)
    model, feeds = build_lsh(SPARSE, _seeds(3, 32), x, None)
    assert_matches_litert(model, feeds)


@pytest.mark.parametrize("constant", [False, True], ids=["runtime", "constant"])
def test_lsh_projection_of_strings_hashes_their_encoding(constant: bool) -> None:
    """A STRING input is hashed as TFLite holds it: its buffer cut into equal rows."""
    x = strings_array([b"alpha", b"be", b"gamma ray", b""])
    model, feeds = build_lsh(SPARSE, _seeds(4, 6), x, None, const_x=constant)
    assert_matches_litert(model, feeds)


LSH_BAD = {
    "seeds_rank_1": ((6,), (4,), None, "2-D", "NumDimensions(hash) != 2"),
    "33_bits": ((2, 33), (4,), None, "at most 32", "SizeOfDimension(hash, 1) <= 32"),
    "weight_rows_differ": ((2, 4), (4,), (3,), "weight shape", "SizeOfDimension(weight, 0)"),
}


@pytest.mark.parametrize("case", LSH_BAD, ids=LSH_BAD.keys())
def test_lsh_projection_refuses_bad_shapes(case: str) -> None:
    seed_shape, x_shape, w_shape, match, litert_says = LSH_BAD[case]
    b = ModelBuilder()
    g = b.main
    ins = [
        g.const("seeds", RNG.standard_normal(seed_shape).astype(np.float32)),
        g.input("x", x_shape, np.float32),
    ]
    feeds = [RNG.standard_normal(x_shape).astype(np.float32)]
    if w_shape is not None:
        ins.append(g.input("w", w_shape, np.float32))
        feeds.append(np.ones(w_shape, np.float32))
    y = g.tensor("y", (seed_shape[0],), np.int32)
    g.op("LSH_PROJECTION", ins, [y], type=SPARSE)
    g.output(y)
    assert_both_refuse(b.build(), feeds, match, litert_says)


def test_lsh_projection_refuses_an_unknown_type() -> None:
    model, feeds = build_lsh(0, _seeds(2, 3), RNG.standard_normal(4).astype(np.float32), None)
    assert_both_refuse(model, feeds, "neither SPARSE", "(LSH_PROJECTION) failed to prepare")


# -- SKIP_GRAM ----------------------------------------------------------------------------


def build_skip_gram(
    ngram_size: int, max_skip_size: int, include_all: bool, const_text: bytes | None = None
) -> bytes:
    b = ModelBuilder()
    g = b.main
    if const_text is None:
        x = g.input("text", (1,), STR)
    else:
        x = g.const("text", strings_array([const_text]), dtype=STR)
    y = g.tensor("grams", (0,), STR)
    g.op(
        "SKIP_GRAM",
        [x],
        [y],
        ngram_size=ngram_size,
        max_skip_size=max_skip_size,
        include_all_ngrams=include_all,
    )
    g.output(y)
    return b.build()


SKIP_GRAM_CASES = {
    "bigrams": (2, 0, False, b"the quick brown fox jumps"),
    "bigrams_skip_1": (2, 1, False, b"the quick brown fox jumps"),
    "trigrams_skip_2": (3, 2, False, b"a b c d e f"),
    "all_up_to_3_skip_1": (3, 1, True, b"one two three four"),
    "unigrams": (1, 3, False, b"x y z"),
    "tabs_newlines_runs": (2, 1, False, b"a\tb\n\nc   d\re\x0bf\x0cg"),
    "leading_space_dropped": (2, 0, False, b" lead mid end"),
    "leading_space_kept_in_word": (1, 0, False, b" solo"),
    "trailing_spaces": (2, 0, True, b"p q r   "),
    "utf8_words": (2, 1, False, "naïve café déjà vu".encode()),
}


@pytest.mark.parametrize("case", SKIP_GRAM_CASES, ids=SKIP_GRAM_CASES.keys())
def test_skip_gram(case: str) -> None:
    n, skip, include_all, text = SKIP_GRAM_CASES[case]
    model = build_skip_gram(n, skip, include_all)
    assert_strings_match_litert(model, [strings_array([text])])


def test_skip_gram_of_a_constant_string() -> None:
    assert_strings_match_litert(build_skip_gram(2, 1, True, b"red green blue"), [])


def test_skip_gram_takes_str_inputs_as_utf8() -> None:
    model = build_skip_gram(2, 0, False)
    got = run_ours(model, [np.array(["über alles gut"], dtype=object)])[0]
    expected = run_litert(model, [strings_array(["über alles gut"])])[0]
    assert got.tolist() == expected.tolist()


def test_skip_gram_fewer_words_than_the_ngram_gives_none() -> None:
    """LiteRT's Python API cannot return an empty tensor, so this one is ours alone."""
    out = run_ours(build_skip_gram(3, 0, False), [strings_array([b"two words"])])[0]
    assert out.shape == (0,) and out.dtype == STR


def test_skip_gram_refuses_a_numeric_input() -> None:
    b = ModelBuilder()
    g = b.main
    x, y = g.input("x", (1,), np.int32), g.tensor("y", (0,), STR)
    g.op("SKIP_GRAM", [x], [y], ngram_size=2, max_skip_size=0, include_all_ngrams=False)
    g.output(y)
    assert_both_refuse(b.build(), [np.int32([1])], "STRING", "!= kTfLiteString")


# -- HASHTABLE_LOOKUP ---------------------------------------------------------------------


def build_lookup(
    n_lookups: int, keys: np.ndarray, values: np.ndarray, const_table: bool = True
) -> tuple[bytes, list]:
    b = ModelBuilder()
    g = b.main
    lk = g.input("lookups", (n_lookups,), np.int32)
    feeds: list = []
    if const_table:
        k = g.const("keys", keys, dtype=np.int32)
        v = g.const("values", values, dtype=values.dtype)
    else:
        k = g.input("keys", keys.shape, np.int32)
        v = g.input("values", values.shape, values.dtype)
        feeds = [keys, values]
    out_shape = (n_lookups, *values.shape[1:])
    out, hits = g.tensor("out", out_shape, values.dtype), g.tensor("hits", (n_lookups,), np.uint8)
    g.op("HASHTABLE_LOOKUP", [lk, k, v], [out, hits])
    g.output(out, hits)
    return b.build(), feeds


LOOKUP_CASES = {
    "float_rows": (np.int32([-5, 0, 3, 8, 20]), (5, 3), np.float32, [3, 4, -5, 21, 20, 0]),
    "int32_vector": (np.int32([1, 2, 3]), (3,), np.int32, [2, 9, 1]),
    "uint8_rank3": (np.int32([10, 20]), (2, 2, 2), np.uint8, [20, 10, 15]),
    "int8_rows": (np.int32([4, 7, 9, 11]), (4, 2), np.int8, [11, 12, 4, 7]),
    "unsorted_keys": (np.int32([9, 1, 5, 3, 7]), (5,), np.float32, [9, 1, 5, 3, 7]),
    "extreme_keys": (
        np.int32([-(2**31), -1, 2**31 - 1]),
        (3,),
        np.int32,
        [2**31 - 1, -(2**31), -1, 0],
    ),
}


@pytest.mark.parametrize("const_table", [True, False], ids=["const_table", "runtime_table"])
@pytest.mark.parametrize("case", LOOKUP_CASES, ids=LOOKUP_CASES.keys())
def test_hashtable_lookup(case: str, const_table: bool) -> None:
    keys, value_shape, dtype, lookups = LOOKUP_CASES[case]
    values = random_array(RNG, value_shape, dtype)
    model, feeds = build_lookup(len(lookups), keys, values, const_table)
    assert_matches_litert(model, [np.int32(lookups), *feeds])


@pytest.mark.parametrize("const_table", [True, False], ids=["const_table", "runtime_table"])
def test_hashtable_lookup_of_strings(const_table: bool) -> None:
    values = strings_array([b"zero", b"", b"twenty two", "é".encode()])
    model, feeds = build_lookup(5, np.int32([0, 1, 22, 30]), values, const_table)
    assert_strings_match_litert(model, [np.int32([22, 5, 0, 30, 1]), *feeds])


def test_hashtable_lookup_refuses_rows_that_differ_from_the_keys() -> None:
    model, feeds = build_lookup(
        2, np.int32([1, 2, 3]), np.zeros((2, 2), np.float32), const_table=False
    )
    assert_both_refuse(
        model, [np.int32([1, 2]), *feeds], "rows", "SizeOfDimension(key, 0) != SizeOfDimension"
    )


def test_hashtable_lookup_refuses_int64_lookups() -> None:
    b = ModelBuilder()
    g = b.main
    lk = g.input("lookups", (2,), np.int64)
    k, v = g.const("keys", np.int32([1, 2])), g.const("values", np.float32([1, 2]))
    out, hits = g.tensor("out", (2,), np.float32), g.tensor("hits", (2,), np.uint8)
    g.op("HASHTABLE_LOOKUP", [lk, k, v], [out, hits])
    g.output(out, hits)
    assert_both_refuse(b.build(), [np.int64([1, 2])], "int32", "lookup->type != kTfLiteInt32")
