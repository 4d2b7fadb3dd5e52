"""The discrete problem, its sequential solvers and their known answers (spec: checks with a known answer)."""

import numpy as np
import pytest

from geofed.apps.obstacle import problem as P
from geofed.errors import UserError


@pytest.mark.parametrize("n,bound", [(99, 5.1e-5), (199, 8.3e-6)])
def test_1d_exact_case_within_the_spec_bound(n, bound):
    p = P.problem_1d(n)
    x = P.coordinates(n, 1)[0]
    err = np.max(np.abs(P.sor(p) - P.exact_1d(x)))
    assert err <= bound


def test_1d_projected_richardson_agrees_with_sor():
    p = P.problem_1d(49)
    u, _, r = P.richardson(p, 1e-12)
    assert np.max(np.abs(u - P.sor(p))) < 1e-8
    assert r <= 1e-12


def test_poisson_case_is_second_order():
    errs = [np.max(np.abs(P.sor(P.problem_poisson(n), 1e-12) - P.exact_poisson(n))) for n in (15, 31)]
    assert errs[1] < 1e-3
    assert 3.5 < errs[0] / errs[1] < 4.5


def test_zero_load_below_zero_obstacle_gives_zero():
    p = P.make(10, 3, 1.0, -1.0, 0.0)
    assert np.max(np.abs(P.sor(p))) == 0.0


def test_richardson_error_within_its_certificate():
    p = P.default_3d(16, c=10.0)
    ref = P.sor(p)
    u, _, r = P.richardson(p, 1e-9)
    assert np.max(np.abs(u - ref)) <= p.error_bound(r) + p.error_bound(P.residual(p, ref))
    assert (u >= p.phi).all() and (np.isclose(u, p.phi)).any()  # feasible, with a contact set


def test_bad_input_is_named():
    with pytest.raises(UserError, match="--delta"):
        P.default_3d(16, delta=1.0)
    with pytest.raises(UserError, match="too small for 4 peers"):
        P.split(7, 4)
    with pytest.raises(UserError, match="--n"):
        P.default_3d(0)
