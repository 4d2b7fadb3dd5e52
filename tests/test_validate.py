import argparse

import pytest

from geofed import validate


@pytest.mark.parametrize("check,text,value", [
    (validate.positive_int, "3", 3), (validate.positive_float, "2.5", 2.5), (validate.finite_float, "-1.5", -1.5)])
def test_good_values_pass(check, text, value):
    assert check(text) == value


@pytest.mark.parametrize("check,text,message", [
    (validate.positive_int, "0", "positive integer"), (validate.positive_int, "-4", "positive integer"),
    (validate.positive_int, "2.5", "an integer"), (validate.positive_float, "nan", "finite"),
    (validate.positive_float, "inf", "finite"), (validate.positive_float, "-1e-9", "positive number"),
    (validate.finite_float, "-inf", "finite"), (validate.positive_float, "abc", "a number")])
def test_bad_values_are_refused_with_the_reason(check, text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        check(text)
