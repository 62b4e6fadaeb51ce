"""The boundary checks of ``gpipe/_validate.py`` take the parameter's name, then its value."""

import pytest

from gpipe._validate import check_bytes, check_seed
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
