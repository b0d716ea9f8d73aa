"""Numeric regression guard: the bundled Whisper base's hidden states on a generated clip, through the
package's own extraction path, against a committed fixture (``tests/golden_states.py`` makes both).

Tolerance: |got - fixture| <= ATOL + RTOL * |fixture|, float32 on the CPU. Measured on the fixture's
clip (torch 2.13 CPU, 2-core x86 machine): 1, 2 and 4 threads and repeated runs are bit-identical; float32
against the same extraction in float64 differs by at most 9.3e-6 (values up to 13), so every
correct float32 CPU implementation sits at least 10x inside the tolerance, while a 0.1 % change of
the input gain already exceeds it 3-5x and a one-sample delay ~1000x: what it catches is a change
of preprocessing, weights conversion, model code or hooks, not rounding.
"""

import numpy as np
import pytest

from tests.golden_states import FIXTURE, SITES, states

pytestmark = pytest.mark.slow
ATOL = 1e-4
RTOL = 1e-4
REFRESH = "python -m tests.golden_states (after a deliberate change; say why in the commit)"


@pytest.fixture(scope="module")
def current():
    return states()


def test_the_fixture_is_small_and_covers_its_sites():
    fixture = np.load(FIXTURE)
    assert FIXTURE.stat().st_size < 40_000
    assert set(fixture.files) == {"made_with", "frames", *SITES, *(f"{site}/mean" for site in SITES)}
    assert all(fixture[site].dtype == np.float32 and fixture[site].shape == (len(fixture["frames"]), 512) for site in SITES)


@pytest.mark.parametrize("key", [*SITES, *(f"{site}/mean" for site in SITES)])
def test_whisper_base_hidden_states_match_the_fixture(current, key):
    fixture = np.load(FIXTURE)
    assert np.array_equal(current["frames"], fixture["frames"]), "the clip's valid frames changed"
    got, expected = current[key], fixture[key]
    excess = np.abs(got - expected) - (ATOL + RTOL * np.abs(expected))
    assert excess.max() <= 0, (
        f"{key}: {int((excess > 0).sum())} values outside atol {ATOL} + rtol {RTOL}, worst |diff| {np.abs(got - expected).max():.3g} "
        f"(fixture made with {fixture['made_with']}); if the change is meant, regenerate: {REFRESH}"
    )
