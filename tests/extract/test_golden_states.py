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

from tests.golden_states import FIXTURE, SITES, TINY_FIXTURE, states, tiny_states

pytestmark = pytest.mark.slow
ATOL = 1e-4
RTOL = 1e-4
REFRESH = "python -m tests.golden_states (after a deliberate change; say why in the commit)"


@pytest.fixture(scope="module")
def current():
    return states()


def small_fixture(path, keys, *records):
    """The fixture at ``path``, checked small enough to commit and holding exactly ``keys`` and their
    means, with what made it (``made_with``) and the ``records`` beside them."""
    fixture = np.load(path)
    assert path.stat().st_size < 40_000
    assert set(fixture.files) == {"made_with", *records, *keys, *(f"{key}/mean" for key in keys)}
    return fixture


def excess_over_tolerance(got, expected):
    """How far each value lies outside atol + rtol * |expected| (positive: outside)."""
    return np.abs(got - expected) - (ATOL + RTOL * np.abs(expected))


def test_the_fixture_is_small_and_covers_its_sites():
    fixture = small_fixture(FIXTURE, SITES, "frames")
    assert all(fixture[site].dtype == np.float32 and fixture[site].shape == (len(fixture["frames"]), 512) for site in SITES)


@pytest.mark.parametrize("key", [*SITES, *(f"{site}/mean" for site in SITES)])
def test_whisper_base_hidden_states_match_the_fixture(current, key):
    fixture = np.load(FIXTURE)
    assert np.array_equal(current["frames"], fixture["frames"]), "the clip's valid frames changed"
    got, expected = current[key], fixture[key]
    excess = excess_over_tolerance(got, expected)
    assert excess.max() <= 0, (
        f"{key}: {int((excess > 0).sum())} values outside atol {ATOL} + rtol {RTOL}, worst |diff| {np.abs(got - expected).max():.3g} "
        f"(fixture made with {fixture['made_with']}); if the change is meant, regenerate: {REFRESH}"
    )


@pytest.fixture(scope="module")
def tiny_current():
    return tiny_states()


def test_the_tiny_family_fixture_covers_every_family_and_site():
    from extract.families import FAMILY_MODULES, tiny_extractor

    expected = {f"{family}/{site}" for family in FAMILY_MODULES for site in tiny_extractor(family).resolve_sites("all")}
    fixture = small_fixture(TINY_FIXTURE, expected)
    assert "transformers 4.57" in str(fixture["made_with"])  # made on the legacy stack: the current one is compared with it


def test_every_tiny_familys_states_match_the_fixture_made_under_transformers_4_57(tiny_current):
    """Both tested stacks give the tiny models' states within the tolerance above: the weights are drawn by
    extract.families.base.redraw_weights where transformers' own initialisation differs between releases."""
    fixture = np.load(TINY_FIXTURE)
    worst = {}
    for key in fixture.files:
        if key == "made_with":
            continue
        got, expected = tiny_current[key], fixture[key]
        assert got.shape == expected.shape, key
        excess = excess_over_tolerance(got, expected)
        if excess.max() > 0:
            worst[key] = float(np.abs(got - expected).max())
    assert not worst, f"outside atol {ATOL} + rtol {RTOL} (fixture made with {fixture['made_with']}): {worst}; if meant, regenerate: {REFRESH}"
