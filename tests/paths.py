"""Where the tests find the checkout and their fixture files (the tests sit in folders by package)."""

from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]  # the source checkout: the folder holding tests/
FIXTURES = CHECKOUT / "tests" / "fixtures"
