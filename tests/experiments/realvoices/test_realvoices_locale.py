"""The real voices' second attribute (issue 32 item 1): ``extra.locale`` where the package states it, absent elsewhere."""

from __future__ import annotations

import dataclasses

from experiments.recipes.realvoices.build import build_realvoices
from experiments.recipes.realvoices.sources import VOICES
from extract.manifest import read_manifest
from tests.experiments.realvoices.test_realvoices import FAKE_VOICES, _fake_cache


def test_every_locale_is_the_one_its_folder_states():
    stated = {voice.key: voice.locale for voice in VOICES if voice.locale}
    assert stated == {
        "allison-smith-en": "en_US",
        "allison-smith-es": "es_MX",
        "june-wallack-fr": "fr_CA",
        "carlo-flora-it": "it_IT",
        "ivrvoice-ru": "ru_RU",
        "menardi-it": "it_IT",
        "tuxpaint-numbers-en": "en_GB",  # stated by the stamps' file tag and the changelog's credit, not by a folder
    }
    for voice in VOICES:
        if voice.locale and voice.key != "tuxpaint-numbers-en":
            assert voice.gender_source.startswith(f"folder {voice.locale}_") and voice.language == voice.locale.split("_")[0]
    arundel = next(voice for voice in VOICES if voice.key == "tuxpaint-numbers-en")
    assert arundel.suffix.endswith("_en_GB.ogg") and "British English" in arundel.gender_source


def test_the_manifest_carries_a_locale_only_where_one_is_stated(tmp_path):
    voices = (dataclasses.replace(FAKE_VOICES[0], locale="en_US"), *FAKE_VOICES[1:])
    build_realvoices(tmp_path / "out", per_speaker=1, seed=1, cache=_fake_cache(tmp_path / "cache"), voices=voices, show_progress=False)
    locales = {u.extra["voice"]: u.extra.get("locale") for u in read_manifest(tmp_path / "out/manifest.jsonl")}
    assert locales == {"ann-en": "en_US", "carl-en": None, "bob-xx": None}
