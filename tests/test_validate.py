"""The boundary checks of ``gpipe/_validate.py`` take the parameter's name, then its value."""

import pytest

from gpipe._validate import check_seed
from gpipe.errors import GpipeValueError


def test_check_seed_takes_the_name_then_the_value_as_check_int_does():
    assert check_seed("walks.seed", 2**63 - 1) == 2**63 - 1
    with pytest.raises(GpipeValueError, match=r"^'walks\.seed' must be an integer >= 0, got -1$"):
        check_seed("walks.seed", -1)
