"""The boundary checks of ``gpipe/_validate.py`` take the parameter's name, then its value."""

import re

import pytest

import numpy as np
import pandas as pd

from gpipe._validate import check_bytes, check_integers, check_path, check_seed, is_ascii_digits
from gpipe.errors import GpipeValueError


def test_check_seed_takes_the_name_then_the_value_as_check_int_does():
    assert check_seed("walks.seed", 2**63 - 1) == 2**63 - 1
    with pytest.raises(GpipeValueError, match=r"^'walks\.seed' must be an integer >= 0, got -1$"):
        check_seed("walks.seed", -1)


@pytest.mark.parametrize("text", ["1e400", "1e400 GB", "inf", "nan"])
def test_check_bytes_refuses_a_byte_count_past_every_integer_naming_the_parameter(text):
    with pytest.raises(GpipeValueError, match=rf"^'device_budget' must be a byte count such as 1000000 or '4 GB', "
                                              rf"got '{text}'$"):
        check_bytes("device_budget", text)


@pytest.mark.parametrize("value, shown", [
    (np.array([3, 2**64 - 1], np.uint64), "integers below 2**63, got 18446744073709551615"),  # int64 would wrap it to -1
    ([0, 2**63], "integers below 2**63, got 9223372036854775808"),  # numpy reads this list as floats
    ([1, 2**70], "integers below 2**63, got 1180591620717411303424"),
    (pd.Series([0, 1, None]), "integers, got dtype float64 (e.g. nan)"),
    ([1.0, 2.5], "integers, got dtype float64 (e.g. 2.5)"),
    (pd.Series([1.0, 2.0]), "integers, got dtype float64 (e.g. 1.0)"),  # whole floats too: a float column
    ([True, False], "integers, got dtype bool (e.g. True)"),
    ([2, True], "integers, got dtype object (e.g. True)"),  # numpy reads this list as int64 [2, 1]
    ([(0, 1), (1, False)], "integers, got dtype object (e.g. False)"),
    (["7"], "integers, got dtype <U1 (e.g. '7')"),
    ([-1, 2], "integers >= 0, got -1"),
])
def test_check_integers_keeps_ids_exact_or_refuses_the_first_bad_one_by_name(value, shown):
    with pytest.raises(GpipeValueError, match="^" + re.escape(f"'ids' must hold {shown}") + "$"):
        check_integers("ids", value)


def test_check_integers_gives_int64_of_any_integer_input():
    for value in ([5, 2**63 - 1], np.array([5, 2**63 - 1], np.uint64), pd.Series([5, 2**63 - 1])):
        out = check_integers("ids", value)
        assert out.dtype == np.int64 and out.tolist() == [5, 2**63 - 1]


@pytest.mark.parametrize("text, digits", [
    ("0", True), ("0042", True), ("9" * 30, True),
    ("", False), ("²", False), ("١٢", False), ("+1", False), ("-1", False), ("1_000", False), (" 1", False),
    ("1.0", False),
])
def test_only_ascii_digits_are_digits_in_a_file_or_a_flag(text, digits):
    assert is_ascii_digits(text) is digits


class _BytesPath:
    def __fspath__(self):
        return b"walks.txt"


def test_check_path_takes_a_str_or_a_path_like_giving_one_and_refuses_the_rest_by_name(tmp_path):
    assert check_path("path", str(tmp_path)) == check_path("path", tmp_path) == str(tmp_path)
    for value in (b"walks.txt", _BytesPath(), 3, None):
        with pytest.raises(GpipeValueError, match=rf"^'path' must be a str or an os.PathLike path, got "
                                                  rf"{re.escape(repr(value))}$"):
            check_path("path", value)
